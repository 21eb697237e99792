"""Upgrading a store written before spans were stored once (migrations up to 0030, the schema of main before
issue 17): the migrations add ``otel_traces.Version`` and make the RED view count first copies, in place and
idempotently, and every read then counts each span once, the duplicates the old writer stored included. And one
written before trace summaries stored their data quality (migrations up to 0072, before issue 27's 0080), and one
written before they stored the conversation (before issue 32's 0090); both read, once upgraded, through the summaries'
copy sorted by time (issue 34's 0110-0112), which takes the summaries stored before it."""

from __future__ import annotations

import pyarrow as pa
import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

from analysis import STAGES
from collector.batch import to_batch
from collector.otlp_json import request_from_json
from storage import migrations
from storage.analysis_store import (
    TRACE_SUMMARY_SCHEMA,
    AnalysisFilter,
    ClickHouseAnalysisStore,
    ConversationFilter,
)
from storage.clickhouse import ClickHouse
from storage.migrations import applied_versions, apply_migrations, migration_files
from storage.reader import ClickHouseTraceReader, TraceQuery
from storage.schema import with_tenant
from storage.writer import ClickHouseTraceWriter

TRACE = "0123456789abcdef0123456789abcdef"
START_NS = 1_700_000_000_000_000_000
_OLD_SUMMARY = pa.schema(list(TRACE_SUMMARY_SCHEMA)[: TRACE_SUMMARY_SCHEMA.get_field_index("Sampled") + 1])
"""``hotspan_trace_summary``'s layout before migration 0080: the columns up to ``Sampled``."""
_BEFORE_CONVERSATIONS = pa.schema(list(TRACE_SUMMARY_SCHEMA)[: TRACE_SUMMARY_SCHEMA.get_field_index("ConversationId")])
"""Its layout before migration 0090: the columns up to ``ImplausibleRoot``."""


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


def _summary(trace_id: str, schema: pa.Schema, **quality: object) -> pa.Table:
    """One trace summary row of ``schema`` (the current layout, or an older one without some columns)."""
    row: dict[str, object] = {
        "Tenant": "default",
        "Timestamp": START_NS,
        "TraceId": trace_id,
        "RootSpanId": "0000000000000001",
        "RootService": "old",
        "RootName": "op0",
        "DurationNs": 1000,
        "SpanCount": 3,
        "ServiceCount": 1,
        "ErrorCount": 0,
        "HotspotCount": 0,
        "RequestTenant": "",
        "Model": "",
        "LlmCalls": 0,
        "TtftNs": None,
        "TpotNs": None,
        "StageNs": [("other", 1000)],
        "AnalysedSpans": 3,
        "Version": 1,
        "InputTokens": 0,
        "OutputTokens": 0,
        "CachedInputTokens": 0,
        "ReasoningTokens": 0,
        "Sampled": True,
        "ConversationId": "",
    } | quality
    return pa.Table.from_pylist([{name: row[name] for name in schema.names}], schema=schema)


def test_trace_summaries_stored_before_data_quality_read_as_unrecorded_after_the_upgrade(store: ClickHouse) -> None:
    # Migration 0080 adds what each request's window rests on (issue 27) to hotspan_trace_summary; a summary written
    # before reads ParentlessSpans 0 (a trace always holds a parentless span), so the Stages page counts it apart.
    store.command(f"DROP DATABASE {store.database}")
    old = ClickHouse(store.dsn, store.database)
    try:
        assert apply_migrations(old, up_to=79)[-1] < 80
        quality_columns = [field.name for field in _BEFORE_CONVERSATIONS if field.name not in _OLD_SUMMARY.names]
        assert quality_columns == [
            "Enveloped",
            "ParentlessSpans",
            "ReattachedSpans",
            "OutlivingSpans",
            "ExtendedSpans",
            "ExtendedNs",
            "ImplausibleRoot",
        ]
        old.insert_arrow("hotspan_trace_summary", _summary("0" * 31 + "1", _OLD_SUMMARY))

        assert apply_migrations(old, up_to=89) == [80]
        assert apply_migrations(old, up_to=89) == []
        # A summary of the new pipeline: a missing root (envelope), three parentless spans, work kept past its parent.
        repaired = {"Enveloped": True, "ParentlessSpans": 3, "ReattachedSpans": 0, "OutlivingSpans": 0}
        repaired |= {"ExtendedSpans": 2, "ExtendedNs": 0, "ImplausibleRoot": False}
        old.insert_arrow("hotspan_trace_summary", _summary("0" * 31 + "2", _BEFORE_CONVERSATIONS, **repaired))
        # The rest: both summaries reach the copy sorted by time (0112) that the window reads below use.
        assert 112 in apply_migrations(old)
        analysis = ClickHouseAnalysisStore(old, STAGES)
        rows = analysis.trace_summaries(AnalysisFilter(), 10, tenant="default").sort("trace_id")
        assert rows["parentless_spans"].to_list() == [0, 3] and rows["enveloped"].to_list() == [False, True]
        assert rows["extended_spans"].to_list() == [0, 2]
        (counts,) = analysis.window_quality(AnalysisFilter(), "", tenant="default").iter_rows(named=True)
        assert counts == {
            "group": "",
            "requests": 2,
            "unrecorded": 1,
            "enveloped": 1,
            "attached": 1,
            "outliving": 1,
            "implausible_root": 0,
            "reattached": 0,
        }
        examples = analysis.quality_examples(AnalysisFilter(), 5, tenant="default")
        assert examples["repair"].to_list() == ["attached", "enveloped", "outliving"]
        assert set(examples["trace_id"]) == {"0" * 31 + "2"}
    finally:
        old.close()


def test_conversations_are_read_from_summaries_stored_after_the_upgrade_and_per_tenant(store: ClickHouse) -> None:
    # Migration 0090 adds the conversation a request is a turn of (issue 32); a summary written before names none
    # and is no conversation's turn until the trace is analysed again.
    store.command(f"DROP DATABASE {store.database}")
    old = ClickHouse(store.dsn, store.database)
    try:
        apply_migrations(old, up_to=89)
        whole = {"Enveloped": False, "ParentlessSpans": 1, "ReattachedSpans": 0, "OutlivingSpans": 0}
        whole |= {"ExtendedSpans": 0, "ExtendedNs": 0, "ImplausibleRoot": False}
        old.insert_arrow("hotspan_trace_summary", _summary("0" * 31 + "1", _BEFORE_CONVERSATIONS, **whole))
        assert apply_migrations(old)[0] == 90
        analysis = ClickHouseAnalysisStore(old, STAGES)
        assert analysis.conversations(ConversationFilter(), "last_seen", 10, tenant="default").height == 0
        for index, tenant in ((2, "default"), (3, "default"), (4, "acme")):
            start = START_NS + index * 10**9
            turn = _summary(f"{index:032x}", TRACE_SUMMARY_SCHEMA, **whole, ConversationId="c-1", Timestamp=start)
            analysis.write_trace_summaries(turn.set_column(0, "Tenant", pa.array([tenant])), {})
        (row,) = analysis.conversations(ConversationFilter(), "last_seen", 10, tenant="default").iter_rows(named=True)
        assert (row["conversation_id"], row["turns"], sorted(row["trace_ids"])) == (
            "c-1",
            2,
            [f"{2:032x}", f"{3:032x}"],
        )
        turns = analysis.conversation_turns("c-1", 10, tenant="acme")
        assert turns["trace_id"].to_list() == [f"{4:032x}"] and turns["other_ns"].to_list() == [1000]
        assert analysis.conversation_turns("c-1", 10, tenant="other").height == 0
        assert analysis.conversations(ConversationFilter(), "turns", 10, tenant=None)["turns"].to_list() == [3]
        # A turn in the window lists its conversation whole: its other turns started before the window.
        later = ConversationFilter(start_ns=START_NS + 3 * 10**9)
        (row,) = analysis.conversations(later, "last_seen", 10, tenant="default").iter_rows(named=True)
        assert (row["turns"], row["first_start_ns"]) == (2, START_NS + 2 * 10**9)
        assert analysis.conversations(ConversationFilter(end_ns=START_NS), "last_seen", 10, tenant="default").is_empty()
    finally:
        old.close()


def test_a_failed_migration_records_those_before_it_and_a_retry_resumes(
    store: ClickHouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.command(f"DROP DATABASE {store.database}")
    fresh = ClickHouse(store.dsn, store.database)
    files = migration_files()
    first = [file for file in files if file[0] < 10]
    broken = (first[-1][0] + 1, "broken", "CREATE TABLE IF NOT EXISTS broken (x NoSuchType) ENGINE = Memory")
    try:
        monkeypatch.setattr(migrations, "migration_files", lambda: [*first, broken, *files[len(first) :]])
        with pytest.raises(DatabaseError, match="NoSuchType"):
            apply_migrations(fresh)
        assert applied_versions(fresh) == {version for version, _, _ in first}
        monkeypatch.undo()
        assert apply_migrations(fresh) == [version for version, _, _ in files[len(first) :]]
        assert applied_versions(fresh) == {version for version, _, _ in files}
        assert fresh.query_rows(f"SELECT count() FROM {migrations.LEDGER}") == [(len(files),)]
    finally:
        fresh.close()
