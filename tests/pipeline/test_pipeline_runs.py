"""The trace pipeline against a real embedded ClickHouse: the work list, idleness, late spans, idempotence,
processors, tenants, ``hotspan import``."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import polars as pl
import pytest
from pipeline_support import MS, T0, Span, store_spans, vllm_agent_trace

from analysis import STAGES, TraceAnalysis
from collector.ingest import Ingestor
from hotspan.cli import main
from hotspan.importer import StoreSink, import_paths
from processors.pipeline.base import TraceProcessor
from processors.pipeline.config import TracePipelineConfig
from processors.pipeline.trace_pipeline import TracePipeline
from storage import analysis_sql
from storage.analysis_store import AnalysisFilter, ClickHouseAnalysisStore
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader
from storage.writer import ClickHouseTraceWriter
from testkit import TRACES

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
TRACE = "5b8efff798038103d269b633813fc60c"


def _pipeline(
    store: ClickHouse,
    *,
    trace_idle_s: float = 10.0,
    clock: Callable[[], float] | None = None,
    processors: Sequence[TraceProcessor] = (),
) -> TracePipeline:
    return TracePipeline(
        ClickHouseAnalysisStore(store, STAGES),
        ClickHouseTraceReader(store),
        TracePipelineConfig(trace_idle_s=trace_idle_s),
        processors,
        clock=clock,
    )


def _rows(store: ClickHouse, sql: str) -> list[tuple]:
    return store.query_rows(sql)


class Recorder:
    """A TraceProcessor that remembers what it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[set[str], set[str], int]] = []

    def process(
        self, spans: pl.DataFrame, analysis: TraceAnalysis, first_seen: set[str], sampled_out: frozenset[str]
    ) -> None:
        self.calls.append((set(spans["trace_id"].unique()), set(first_seen), analysis.tree.size))


def test_import_summarises_every_trace_once_with_stages_summing_to_the_root(store: ClickHouse) -> None:
    import_paths([DEMO], StoreSink(ClickHouseTraceWriter(store)), progress=False)
    recorder = Recorder()

    result = _pipeline(store, processors=[recorder]).run_once(force=True)

    assert (result.analysed, result.first_seen, result.skipped) == (141, 141, 0)
    assert recorder.calls[0][0] == recorder.calls[0][1] and len(recorder.calls[0][1]) == 141
    # Raw rows, not FINAL: one version of each trace and each of the 547 spans.
    assert _rows(store, "SELECT count(), uniqExact(TraceId) FROM hotspan_trace_summary") == [(141, 141)]
    assert _rows(store, "SELECT count(), uniqExact(TraceId, SpanId) FROM hotspan_span_analysis") == [(547, 547)]
    # The critical-path stage totals tile the root exactly (the issue allows 1 µs).
    off = _rows(
        store, "SELECT max(abs(toInt64(arraySum(mapValues(StageNs))) - toInt64(DurationNs))) FROM hotspan_trace_summary"
    )
    assert off[0][0] <= 1_000
    assert _rows(
        store, "SELECT sum(AnalysedSpans), sum(SpanCount), min(Tenant), max(Tenant) FROM hotspan_trace_summary"
    ) == [(547, 547, "default", "default")]
    # Nothing is due any more, and a second run changes nothing.
    assert _pipeline(store).run_once(force=True).analysed == 0
    assert _rows(store, "SELECT count() FROM hotspan_trace_summary") == [(141,)]


@pytest.mark.both_layouts
def test_a_trace_is_analysed_once_quiet_and_again_after_late_spans(store: ClickHouse, ingestor: Ingestor) -> None:
    now = [time.time()]
    recorder = Recorder()
    pipeline = _pipeline(store, trace_idle_s=5.0, clock=lambda: now[0], processors=[recorder])
    spans = vllm_agent_trace(queue_ms=100, prefill_ms=200, decode_ms=500, completion_tokens=101, tenant="acme")
    store_spans(ingestor, TRACE, spans[:4])

    # The spans arrived (ClickHouse's clock) about now: not quiet for 5 s yet.
    assert pipeline.run_once().analysed == 0
    assert _rows(store, "SELECT count() FROM hotspan_trace_summary") == [(0,)]

    now[0] += 10
    first = pipeline.run_once()
    assert (first.analysed, first.first_seen) == (1, 1)
    assert _rows(store, f"SELECT SpanCount, AnalysedSpans FROM hotspan_trace_summary WHERE TraceId = '{TRACE}'") == [
        (4, 4)
    ]
    assert pipeline.run_once().analysed == 0

    # The vLLM span arrives late: the trace is due again once quiet, and its analysis is replaced.
    store_spans(ingestor, TRACE, spans[4:])
    now[0] = time.time()
    assert pipeline.run_once().analysed == 0
    now[0] += 10
    again = pipeline.run_once()
    assert (again.analysed, again.first_seen) == (1, 0)
    assert [call[1] for call in recorder.calls] == [{TRACE}, set()]
    assert recorder.calls[1][2] == 5
    final = _rows(
        store,
        f"SELECT count(), any(SpanCount), any(AnalysedSpans), any(StageNs['llm.decode']) "
        f"FROM hotspan_trace_summary FINAL WHERE TraceId = '{TRACE}'",
    )
    assert final == [(1, 5, 5, 500 * MS)]
    # Two versions stored, one read: FINAL keeps the newest (merges drop the other eventually).
    assert _rows(store, "SELECT count() FROM hotspan_trace_summary")[0][0] in (1, 2)
    assert _rows(store, "SELECT count(), uniqExact(SpanId) FROM hotspan_span_analysis FINAL") == [(5, 5)]


def test_a_failing_processor_leaves_the_batch_due_and_it_is_redone_whole(store: ClickHouse, ingestor: Ingestor) -> None:
    store_spans(
        ingestor, TRACE, vllm_agent_trace(queue_ms=1, prefill_ms=2, decode_ms=3, completion_tokens=2, tenant="t")
    )

    class Failing:
        def process(
            self, spans: pl.DataFrame, analysis: TraceAnalysis, first_seen: set[str], sampled_out: frozenset[str]
        ) -> None:
            raise RuntimeError("rollup store down")

    with pytest.raises(RuntimeError, match="rollup store down"):
        _pipeline(store, processors=[Failing()]).run_once(force=True)
    assert _rows(store, "SELECT count() FROM hotspan_trace_summary") == [(0,)]

    recorder = Recorder()
    assert _pipeline(store, processors=[recorder]).run_once(force=True).analysed == 1
    assert recorder.calls == [({TRACE}, {TRACE}, 5)]


def test_each_owner_tenant_gets_its_own_analysis_of_a_shared_trace_id(store: ClickHouse, ingestor: Ingestor) -> None:
    # Two tenants send spans under the same trace ID: neither sees the other's spans in its analysis.
    store_spans(
        ingestor,
        TRACE,
        vllm_agent_trace(queue_ms=1, prefill_ms=2, decode_ms=3, completion_tokens=2, tenant="x"),
    )
    store_spans(ingestor, TRACE, [Span("00000000000000aa", "", "billing", "charge", 0, 7)], tenant="globex")

    assert _pipeline(store).run_once(force=True).analysed == 2

    rows = _rows(
        store, "SELECT Tenant, SpanCount, RootService, DurationNs FROM hotspan_trace_summary FINAL ORDER BY Tenant"
    )
    assert rows == [("default", 5, "gateway", 206 * MS), ("globex", 1, "billing", 7 * MS)]
    # Every window read is limited to the reading tenant; None (an admin) reads both.
    analysis = ClickHouseAnalysisStore(store, STAGES)
    everything = AnalysisFilter()
    globex = analysis.trace_summaries(everything, 10, tenant="globex")
    assert globex["root_service"].to_list() == ["billing"]
    assert analysis.trace_summaries(everything, 10, tenant=None).height == 2
    assert analysis.span_rows(everything, 10, tenant="globex")["name"].to_list() == ["charge"]
    assert analysis.hotspot_ranking(everything, "self_total_ns", 10, tenant="globex")["name"].to_list() == ["charge"]
    assert analysis.flame_nodes(everything, tenant="globex")["name"].to_list() == ["charge"]
    assert analysis.latency_percentiles(everything, "", tenant="globex")["e2e_p50_ns"].to_list() == [7 * MS]
    assert set(analysis.stage_percentiles(everything, "service", tenant="globex")["group"]) == {"billing"}
    assert analysis.stage_shares_over_time(everything, 60 * 10**9, tenant="globex")["requests"].max() == 1
    assert analysis.trace_summaries(everything, 10, tenant="initech").height == 0


def test_hotspan_import_analyses_at_once(
    store: ClickHouse, chdb_dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOTSPAN_CLICKHOUSE_DATABASE", store.database)
    if store.layout.clustered:
        monkeypatch.setenv("HOTSPAN_CLICKHOUSE_CLUSTER", str(store.layout.cluster))
        monkeypatch.setenv("HOTSPAN_CLICKHOUSE_REPLICATED", "false")
    monkeypatch.setenv("HOTSPAN_TRACE_IDLE_S", "3600")

    assert main(["import", str(DEMO), "--clickhouse-dsn", chdb_dsn, "--no-progress"]) == 0

    assert "analysed: 141 traces" in capsys.readouterr().out
    assert _rows(store, "SELECT count() FROM hotspan_trace_summary FINAL") == [(141,)]


def test_the_work_list_survives_a_restart(store: ClickHouse, ingestor: Ingestor) -> None:
    # Arrivals live in ClickHouse: a new pipeline (a restarted process) finds the same due traces.
    store_spans(
        ingestor, TRACE, vllm_agent_trace(queue_ms=1, prefill_ms=2, decode_ms=3, completion_tokens=2, tenant="t")
    )
    later = time.time() + 60
    assert _pipeline(store, trace_idle_s=1.0, clock=lambda: later).run_once().analysed == 1
    store_spans(ingestor, "0" * 31 + "1", [Span("0000000000000001", "", "svc", "op", 0, 1)], T0 + 10**12)
    assert _pipeline(store, trace_idle_s=1.0, clock=lambda: later).run_once().analysed == 1
    assert _rows(store, "SELECT count() FROM hotspan_trace_summary FINAL") == [(2,)]


def test_the_work_list_carries_each_stored_start_whatever_the_servers_join_setting(
    store: ClickHouse, ingestor: Ingestor
) -> None:
    # A server profile may set join_use_nulls = 1; the work list's join must still see a trace without a summary.
    spans = vllm_agent_trace(queue_ms=100, prefill_ms=200, decode_ms=500, completion_tokens=101, tenant="t")
    store_spans(ingestor, TRACE, spans[:4])
    later = time.time() + 60
    assert _pipeline(store, clock=lambda: later).run_once().analysed == 1
    ((start,),) = _rows(
        store, f"SELECT toUnixTimestamp64Nano(Timestamp) FROM hotspan_trace_summary WHERE TraceId = '{TRACE}'"
    )
    store_spans(ingestor, TRACE, spans[4:])
    store_spans(ingestor, "0" * 31 + "1", spans[:2])
    parameters = {"cutoff_ms": 2**62, "since_ms": 0, "limit": 10, "skipped": [], "shard": 0, "shards": 1}

    for join_use_nulls in (0, 1):
        due = store.query_arrow(analysis_sql.PENDING_TRACES, parameters, {"join_use_nulls": join_use_nulls})
        listed = zip(due["trace_id"].to_pylist(), due["summary_start_ns"].to_pylist(), strict=True)
        assert sorted(listed) == [("0" * 31 + "1", None), (TRACE, start)], join_use_nulls
