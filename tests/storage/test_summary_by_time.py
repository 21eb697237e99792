"""The request summaries sorted by start (``hotspan_trace_summary_by_time``, migrations 0110-0112; issue 34: stages
over 1 h at 100M spans read the whole ``StageNs`` column of the summaries sorted by trace, 3.2 s). A window of
requests reads the window's granules, and a trace whose start an analysis moves (its root arrived late) is counted
once, at its latest start, in every window read."""

from __future__ import annotations

import copy

import pyarrow as pa
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from analysis import STAGES
from collector.ingest import Ingestor
from hotspan.importer import CheckedPayload, import_paths
from processors.pipeline.config import TracePipelineConfig
from processors.pipeline.trace_pipeline import TracePipeline
from storage.analysis_store import TRACE_SUMMARY_SCHEMA, AnalysisFilter, ClickHouseAnalysisStore
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader
from storage.writer import ClickHouseTraceWriter
from testkit import TRACES, fewest_events

DAY_START_NS = 1_767_225_600 * 10**9
"""2026-01-01 00:00:00 UTC."""
HOUR_NS = 3600 * 10**9
REQUESTS_PER_HOUR = 10_000
CAPTURE = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
"""oteltui's test data: 141 traces of 547 spans, recorded by OpenTelemetry SDKs."""


def _columns(store: ClickHouse, table: str) -> list[tuple[str, str]]:
    return [
        (row[0], row[1])
        for row in store.query_rows(
            "SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = {table:String}"
            " ORDER BY position",
            {"table": table},
        )
    ]


def _summary(trace_id: str, start_ns: int, version: int, duration_ns: int = 1000) -> pa.Table:
    row = {field.name: None for field in TRACE_SUMMARY_SCHEMA} | {
        "Tenant": "default",
        "Timestamp": start_ns,
        "TraceId": trace_id,
        "RootService": "frontend",
        "DurationNs": duration_ns,
        "SpanCount": 2,
        "StageNs": [("other", duration_ns)],
        "AnalysedSpans": 2,
        "Version": version,
        "Sampled": True,
    }
    return pa.Table.from_pylist([row], schema=TRACE_SUMMARY_SCHEMA)


def _listed(analysis: ClickHouseAnalysisStore, start_ns: int, end_ns: int) -> dict[str, int]:
    """The window's requests as the request list shows them: trace ID to start (ns)."""
    window = AnalysisFilter(start_ns=start_ns, end_ns=end_ns)
    listed = analysis.trace_summaries(window, 1000, tenant="default")
    return dict(listed[["trace_id", "start_time_unix_nano"]].iter_rows())


def _requests(analysis: ClickHouseAnalysisStore, start_ns: int, end_ns: int) -> list[str]:
    """The trace IDs the window's reads count: the listing, checked against the percentiles' and the stages' counts."""
    window = AnalysisFilter(start_ns=start_ns, end_ns=end_ns)
    listed = list(_listed(analysis, start_ns, end_ns))
    latency = analysis.latency_percentiles(window, "", tenant="default")
    stages = analysis.stage_percentiles(window, "", tenant="default")
    assert latency["requests"].to_list() == ([len(listed)] if listed else [])
    assert set(stages["requests"].to_list()) == ({len(listed)} if listed else set())
    return sorted(listed)


def test_the_copy_sorted_by_time_has_the_summarys_columns(store: ClickHouse) -> None:
    # A column added to hotspan_trace_summary must be added to the copy too (0111's view and 0112's backfill copy `*`).
    assert _columns(store, "hotspan_trace_summary_by_time") == [
        *_columns(store, "hotspan_trace_summary"),
        ("Deleted", "UInt8"),
    ]


@pytest.mark.both_layouts
def test_a_trace_whose_start_moves_is_counted_once_at_its_latest_start(store: ClickHouse) -> None:
    analysis = ClickHouseAnalysisStore(store, STAGES)
    trace, other = "a" * 32, "b" * 32
    late_root = DAY_START_NS + 10 * HOUR_NS - 5 * 10**9  # 09:59:55, five seconds before the envelope's first span

    envelope = DAY_START_NS + 10 * HOUR_NS
    analysis.write_trace_summaries(_summary(trace, envelope, version=1), {})
    analysis.write_trace_summaries(_summary(other, envelope + 1, version=1), {})
    assert _requests(analysis, DAY_START_NS + 10 * HOUR_NS, DAY_START_NS + 11 * HOUR_NS) == [trace, other]

    # The root arrives: the trace now starts in the hour before.
    analysis.write_trace_summaries(
        _summary(trace, late_root, version=2, duration_ns=5 * 10**9), {("default", trace): envelope}
    )
    assert _requests(analysis, DAY_START_NS + 10 * HOUR_NS, DAY_START_NS + 11 * HOUR_NS) == [other]
    assert _requests(analysis, DAY_START_NS + 9 * HOUR_NS, DAY_START_NS + 10 * HOUR_NS - 1) == [trace]
    assert _requests(analysis, DAY_START_NS, DAY_START_NS + 24 * HOUR_NS) == [trace, other]

    # Written again where it stood first (a newer version starting there), and again unchanged.
    analysis.write_trace_summaries(_summary(trace, envelope, version=3), {("default", trace): late_root})
    analysis.write_trace_summaries(_summary(trace, envelope, version=4), {("default", trace): envelope})
    assert _requests(analysis, DAY_START_NS + 9 * HOUR_NS, DAY_START_NS + 10 * HOUR_NS - 1) == []
    assert _requests(analysis, DAY_START_NS, DAY_START_NS + 24 * HOUR_NS) == [trace, other]
    if not store.layout.clustered:
        # Merged, the deletion rows stay what hides the versions they replaced.
        store.command("OPTIMIZE TABLE hotspan_trace_summary_by_time FINAL")
        assert _requests(analysis, DAY_START_NS, DAY_START_NS + 24 * HOUR_NS) == [trace, other]


def test_an_hour_of_a_days_requests_reads_the_hours_granules(store: ClickHouse) -> None:
    store.command(f"""
INSERT INTO hotspan_trace_summary (Tenant, Timestamp, TraceId, RootService, DurationNs, StageNs, Version)
SELECT 'default', fromUnixTimestamp64Nano(toInt64({DAY_START_NS} + number * {HOUR_NS // REQUESTS_PER_HOUR})),
    lower(hex(MD5(toString(number)))), 'frontend', 1000 + number % 1000, map('other', 1000 + number % 1000), 1
FROM numbers({24 * REQUESTS_PER_HOUR})""")
    analysis = ClickHouseAnalysisStore(store, STAGES)
    hour = AnalysisFilter(start_ns=DAY_START_NS + 10 * HOUR_NS, end_ns=DAY_START_NS + 11 * HOUR_NS - 1)
    day_granules = -(-24 * REQUESTS_PER_HOUR // 8192)

    stages = analysis.stage_percentiles(hour, "", tenant="default")
    read = fewest_events(store, "SelectedMarks", lambda: analysis.stage_percentiles(hour, "", tenant="default"))

    assert stages.filter(stages["stage"] == "other")["requests"].to_list() == [REQUESTS_PER_HOUR]
    # An hour is 10,000 of the day's 240,000 requests: two or three granules of 30, wherever the hour falls.
    assert read <= 3, f"{read} granules of {day_granules} read for one hour"


class _RootsLast:
    """A sink storing each payload of a file without its root spans, which it keeps for :meth:`send_roots`: the order
    a root arrives in when it ends last and its service exports it after the others."""

    def __init__(self, store: ClickHouse) -> None:
        self._ingestor = Ingestor(ClickHouseTraceWriter(store))
        self._roots: list[ExportTraceServiceRequest] = []

    def send(self, checked: CheckedPayload) -> None:
        roots = copy.deepcopy(checked.request)
        children = checked.request
        for request, keep_roots in ((roots, True), (children, False)):
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    kept = [span for span in scope_spans.spans if (not span.parent_span_id) == keep_roots]
                    del scope_spans.spans[:]
                    scope_spans.spans.extend(kept)
        self._roots.append(roots)
        assert self._ingestor.export(children, checked.rejections).rejected == len(checked.rejections)

    def flush(self) -> None:
        """Nothing is held but the roots, sent by :meth:`send_roots`."""

    def send_roots(self) -> None:
        for request in self._roots:
            assert self._ingestor.export(request).rejected == 0


def test_real_traces_whose_roots_arrive_last_are_each_counted_once_at_the_roots_start(store: ClickHouse) -> None:
    sink = _RootsLast(store)
    import_paths([CAPTURE], sink, progress=False)
    analysis = ClickHouseAnalysisStore(store, STAGES)
    pipeline = TracePipeline(analysis, ClickHouseTraceReader(store), TracePipelineConfig(), [])
    everything = (0, 2**63 - 1)

    pipeline.run_once(force=True)
    first = _listed(analysis, *everything)
    sink.send_roots()
    assert pipeline.run_once(force=True).analysed > 0
    final = _listed(analysis, *everything)

    assert _requests(analysis, *everything) == sorted(final)
    moved = {trace: start for trace, start in first.items() if final[trace] < start}
    assert len(moved) >= 20, f"{len(moved)} of {len(final)} traces' roots start before their other spans"
    for trace, old_start in moved.items():
        # The windows from the envelope's start on no longer hold it; the one from the root's start does.
        assert trace not in _listed(analysis, old_start, everything[1])
        assert trace in _listed(analysis, final[trace], old_start - 1)
