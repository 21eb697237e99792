"""Every read of whole spans and of one trace's operations keeps each span's latest copy, once (issue 34 made them one
scan: the copies of a span sorted latest ``Version`` first, ``LIMIT 1 BY`` its identity): ``trace``, ``traces`` (the
trace pipeline's batch read), ``search_spans``, ``trace_operations`` and the search summaries, on one node and on the
two-shard harness. The copies are written as an OTel Collector or an older writer leaves them (rows with an explicit
``Version``, no check): stale copies that differ from the latest in service, duration, status and attributes, some
arriving after it, and a retry stored twice with equal identity and Version."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest
from pipeline.pipeline_support import T0, Span, otlp_request

from collector.batch import to_batch
from collector.otlp_json import request_from_json
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader, TraceQuery
from storage.schema import with_tenant

TRACE = "ab" * 16
OTHER = "cd" * 16
ROOT = Span("0000000000000001", "", "api", "GET /chat", 0, 10, kind="Server")
RETRIED = Span("0000000000000003", ROOT.span_id, "db", "query", 2, 3)
"""Stored twice with Version 0, content equal: an OTel Collector's retry."""
LATEST = Span("0000000000000002", ROOT.span_id, "llm", "chat", 1, 9, attributes={"copy": "latest"}, error=True)
STALE = {
    version: Span(LATEST.span_id, ROOT.span_id, "llm-stale", "chat", 1, end_ms, attributes={"copy": "stale"})
    for version, end_ms in ((0, 5), (1, 6), (2, 7))
}
"""Earlier copies of :data:`LATEST` (Version 3), by Version: another service, shorter, no error."""


def _insert(store: ClickHouse, trace_id: str, spans: list[Span], version: int) -> None:
    """``spans`` inserted as they are, with ``version``, as one insert (no check: what an OTel Collector does)."""
    batch = with_tenant(to_batch(*request_from_json(otlp_request(trace_id, spans))).table, "default")
    store.insert_arrow("otel_traces", batch.append_column("Version", pa.array([version] * len(spans), pa.uint64())))


def _copies(store: ClickHouse) -> None:
    """:data:`TRACE` with its copies (Versions arriving 1, 3, 0, 2: the latest neither first nor last) and
    :data:`OTHER`, one span of another service."""
    _insert(store, TRACE, [ROOT, RETRIED, STALE[1]], 1)
    _insert(store, TRACE, [LATEST], 3)
    _insert(store, TRACE, [STALE[0], RETRIED], 0)
    _insert(store, TRACE, [STALE[2]], 2)
    _insert(store, OTHER, [Span("0000000000000009", "", "web", "GET /", 0, 1)], 0)


def _span_rows(frame: pl.DataFrame) -> list[tuple[object, ...]]:
    """Each span's (trace, span ID, service, duration ns, status, attributes) of ``frame``, in its order."""
    return [
        (
            row["trace_id"],
            row["span_id"],
            row["service_name"],
            row["duration_ns"],
            row["status_code"],
            row["attributes"],
        )
        for row in frame.iter_rows(named=True)
    ]


EXPECTED = [
    (TRACE, ROOT.span_id, "api", 10_000_000, "Unset", {}),
    (TRACE, LATEST.span_id, "llm", 8_000_000, "Error", {"copy": "latest"}),
    (TRACE, RETRIED.span_id, "db", 1_000_000, "Unset", {}),
]
""":data:`TRACE`'s spans, each once, :data:`LATEST` for its copies, in start order."""


@pytest.mark.both_layouts
def test_whole_span_reads_keep_each_spans_latest_copy_once(store: ClickHouse) -> None:
    _copies(store)
    assert store.query_rows("SELECT count() FROM otel_traces WHERE TraceId = {t:String}", {"t": TRACE}) == [(7,)]
    reader = ClickHouseTraceReader(store)
    assert _span_rows(reader.trace(TRACE, tenant="default")) == EXPECTED
    batch = reader.traces([OTHER, TRACE], tenant="default")
    assert _span_rows(batch.filter(pl.col("trace_id") == TRACE)) == EXPECTED
    assert batch["trace_id"].to_list() == [TRACE] * 3 + [OTHER]  # ordered by trace, then start
    assert _span_rows(reader.search_spans(TraceQuery(service="api"), tenant="default")) == EXPECTED


@pytest.mark.both_layouts
def test_trace_operations_and_search_count_each_spans_latest_copy_once(store: ClickHouse) -> None:
    _copies(store)
    reader = ClickHouseTraceReader(store)
    operations = reader.trace_operations(TRACE, tenant="default")
    assert operations.drop("first_start_ns").rows() == [
        ("api", "GET /chat", 1, 10_000_000, 10_000_000, 0),
        ("llm", "chat", 1, 8_000_000, 8_000_000, 1),
        ("db", "query", 1, 1_000_000, 1_000_000, 0),
    ]
    assert operations["first_start_ns"].to_list() == [T0, T0 + 1_000_000, T0 + 2_000_000]
    summary = reader.search(TraceQuery(service="api"), tenant="default").row(0, named=True)
    assert (summary["span_count"], summary["service_count"], summary["error_count"]) == (3, 3, 1)
    assert (summary["root_service"], summary["duration_ns"]) == ("api", 10_000_000)
