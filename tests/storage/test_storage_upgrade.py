"""Upgrading a store written before spans were stored once (migrations up to 0030, the schema of main before
issue 17): the migrations add ``otel_traces.Version`` and make the RED view count first copies, in place and
idempotently, and every read then counts each span once, the duplicates the old writer stored included."""

from __future__ import annotations

import pyarrow as pa

from collector.batch import to_batch
from collector.otlp_json import request_from_json
from storage.clickhouse import ClickHouse
from storage.migrations import apply_migrations, migration_files
from storage.reader import ClickHouseTraceReader, TraceQuery
from storage.schema import with_tenant
from storage.writer import ClickHouseTraceWriter

TRACE = "0123456789abcdef0123456789abcdef"
START_NS = 1_700_000_000_000_000_000


def _batch(count: int = 3) -> pa.Table:
    spans = [
        {
            "traceId": TRACE,
            "spanId": f"{i + 1:016x}",
            "parentSpanId": "" if i == 0 else "0000000000000001",
            "name": f"op{i}",
            "kind": 2,
            "startTimeUnixNano": str(START_NS + i),
            "endTimeUnixNano": str(START_NS + i + 1000),
        }
        for i in range(count)
    ]
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "old"}}]},
                "scopeSpans": [{"spans": spans}],
            }
        ]
    }
    return with_tenant(to_batch(*request_from_json(body)).table, "default")


def test_a_store_of_the_previous_schema_upgrades_in_place_and_reads_each_span_once(store: ClickHouse) -> None:
    store.command(f"DROP DATABASE {store.database}")
    old = ClickHouse(store.dsn, store.database)
    try:
        assert apply_migrations(old, up_to=30)[-1] == 30
        columns = {
            row[0]
            for row in old.query_rows(
                "SELECT name FROM system.columns WHERE table = 'otel_traces' AND database = currentDatabase()"
            )
        }
        assert "Version" not in columns
        # What the previous writer did with spans re-sent in another batch: it stored them twice.
        old.insert_arrow("otel_traces", _batch())
        old.insert_arrow("otel_traces", _batch(4))

        assert apply_migrations(old) == [version for version, _, _ in migration_files() if version > 30]
        assert apply_migrations(old) == []
        reader = ClickHouseTraceReader(old)
        assert reader.trace(TRACE, tenant="default").height == 4
        assert reader.search(TraceQuery(), tenant="default")["span_count"].to_list() == [4]
        assert old.query_rows("SELECT count(), max(Version) FROM otel_traces")[0] == (7, 0)

        ClickHouseTraceWriter(old).write(_batch(4))  # the new writer: repeats, stored no more
        assert old.query_rows("SELECT count() FROM otel_traces")[0][0] == 7
        old.insert_arrow("otel_traces", _batch().append_column("Version", pa.array([7, 7, 7], pa.uint64())))
        calls_before = old.query_rows("SELECT sum(Calls) FROM hotspan_red_minutes")[0][0]
        assert calls_before == 7, "the old rollup counted the old duplicates; the upgrade does not rewrite it"
        old.insert_arrow("otel_traces", _batch().append_column("Version", pa.array([8, 8, 8], pa.uint64())))
        assert old.query_rows("SELECT sum(Calls) FROM hotspan_red_minutes")[0][0] == calls_before
        assert reader.trace(TRACE, tenant="default").height == 4
    finally:
        old.close()
