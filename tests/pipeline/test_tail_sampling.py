"""Tail sampling in the trace pipeline, against a real embedded ClickHouse: decisions trace by trace on a public
capture, RED and service-graph rollups unchanged by sampling, late spans following their trace's decision (from the
cache and from the stored decision), per-tenant rate limits, baggage-propagated attributes, ``and``."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import polars as pl
import pytest
from pipeline_support import T0, Span, otlp_request, store_spans
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from analysis import STAGES
from collector.ingest import Ingestor
from hotspan.importer import StoreSink, import_paths
from processors.pipeline.config import TracePipelineConfig
from processors.pipeline.service_graph import ServiceGraphProcessor, service_graph
from processors.pipeline.tail_sampling import DecisionCache, TailSampler, TailSamplingMetrics
from processors.pipeline.tail_sampling_policies import (
    TailSamplingConfig,
    TailSamplingError,
    load_tail_sampling,
    parse_tail_sampling,
)
from processors.pipeline.trace_pipeline import TracePipeline
from query.drilldown import stage_examples
from storage.analysis_store import AnalysisFilter, ClickHouseAnalysisStore
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader
from storage.rollup_reader import ClickHouseRollupReader
from storage.service_graph_writer import ClickHouseServiceGraphWriter
from storage.writer import ClickHouseTraceWriter
from testkit import TRACES, query_room, serve_in_process

CAPTURE = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
EXAMPLE = Path(__file__).parents[2] / "processors" / "pipeline" / "tail_sampling.example.yaml"

CAPTURE_POLICIES = {
    "policies": [
        {"name": "errors", "type": "status_code", "status_code": {"status_codes": ["ERROR"]}},
        {"name": "slow", "type": "latency", "latency": {"threshold_ms": 30}},
        {
            "name": "slow-grpc",
            "type": "and",
            "and": {
                "and_sub_policy": [
                    {
                        "name": "grpc",
                        "type": "string_attribute",
                        "string_attribute": {"key": "rpc.system", "values": ["grpc"]},
                    },
                    {"name": "over-10ms", "type": "latency", "latency": {"threshold_ms": 10}},
                ]
            },
        },
        {"name": "baseline", "type": "probabilistic", "probabilistic": {"sampling_percentage": 25}},
    ]
}

RED = """SELECT ServiceName, SpanName, SpanKind, sum(Calls), sum(Errors), sum(DurationSum), max(DurationMax)
FROM hotspan_red_minutes GROUP BY ServiceName, SpanName, SpanKind ORDER BY ServiceName, SpanName, SpanKind"""
GRAPH = """SELECT Client, Server, ConnectionType, sum(Calls), sum(Failed)
FROM hotspan_service_graph_minutes GROUP BY Client, Server, ConnectionType"""


def _pipeline(store: ClickHouse, sampler: TailSampler | None, *, clock: float = 0.0) -> TracePipeline:
    return TracePipeline(
        ClickHouseAnalysisStore(store, STAGES),
        ClickHouseTraceReader(store),
        TracePipelineConfig(trace_idle_s=0),
        [ServiceGraphProcessor(ClickHouseServiceGraphWriter(store))],
        sampler=sampler,
        clock=(lambda: clock) if clock else None,
    )


def _sampler(document: object, registry: CollectorRegistry | None = None, *, now: float = 1_000.0) -> TailSampler:
    metrics = TailSamplingMetrics(registry) if registry is not None else None
    return TailSampler(parse_tail_sampling(document), metrics, clock=lambda: now)


def _ids(store: ClickHouse, sql: str) -> set[str]:
    return {row[0] for row in store.query_rows(sql)}


def _counter(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_the_example_file_loads_and_a_bad_document_names_every_problem() -> None:
    example = load_tail_sampling(EXAMPLE)
    assert isinstance(example, TailSamplingConfig)
    assert [policy.name for policy in example.policies] == [
        "errors",
        "slow",
        "hotspots",
        "debug-requests",
        "slow-model-calls",
        "baseline",
    ]
    assert load_tail_sampling(None) is None
    bad = {
        "policies": [
            {"name": "a", "type": "latency", "latency": {"threshold_ms": 10, "upper_threshold_ms": 5}},
            {"name": "a", "type": "probabilistic", "probabilistic": {"sampling_percentage": 150}},
            {"name": "c", "type": "numeric_attribute"},
            {
                "name": "d",
                "type": "string_attribute",
                "string_attribute": {"key": "k", "values": ["("], "enabled_regex_matching": True},
            },
        ],
        "decision_cache": {"sampled_cache_size": -1},
    }
    with pytest.raises(TailSamplingError) as raised:
        parse_tail_sampling(bad)
    issues = "\n".join(raised.value.issues)
    for where in ("policies[0]", "policies[1]", "policies[2]", "policies[3]", "decision_cache.sampled_cache_size"):
        assert where in issues, issues
    twice = {"policies": [{"name": "a", "type": "always_sample"}, {"name": "a", "type": "hotspot"}]}
    with pytest.raises(TailSamplingError, match=r"repeated: \['a'\]"):
        parse_tail_sampling(twice)


def test_capture_decisions_match_the_policies_trace_by_trace_and_rollups_are_unchanged(store: ClickHouse) -> None:
    import_paths([CAPTURE], StoreSink(ClickHouseTraceWriter(store)), progress=False)
    red_before = store.query_rows(RED)
    # The service graph of every trace, paired from the spans before any is dropped.
    reader = ClickHouseTraceReader(store)
    every_span = reader.traces(list(_ids(store, "SELECT DISTINCT TraceId FROM otel_traces")), tenant="default")
    graph_before = sorted(
        service_graph(every_span.with_columns(pl.lit("default").alias("tenant")))
        .edges.group_by("client", "server", "connection_type")
        .agg(pl.len().cast(pl.UInt64), pl.col("failed").sum().cast(pl.UInt64))
        .rows()
    )
    spans_before = store.query_rows("SELECT TraceId, count() FROM otel_traces GROUP BY TraceId")
    # The policies' expectations, read straight from the stored spans (not through the sampler).
    errors = _ids(store, "SELECT TraceId FROM otel_traces WHERE StatusCode = 'Error'")
    duration_ms = {
        row[0]: row[1]
        for row in store.query_rows(
            "SELECT TraceId, (max(toUnixTimestamp64Nano(Timestamp) + Duration) - min(toUnixTimestamp64Nano(Timestamp)))"
            " / 1e6 FROM otel_traces GROUP BY TraceId"
        )
    }
    grpc = _ids(
        store,
        "SELECT TraceId FROM otel_traces WHERE SpanAttributes['rpc.system'] = 'grpc'"
        " OR ResourceAttributes['rpc.system'] = 'grpc'",
    )
    slow = {trace for trace, ms in duration_ms.items() if ms >= 30}
    slow_grpc = {trace for trace in grpc if duration_ms[trace] >= 10}
    baseline = {trace for trace in duration_ms if int(trace[-14:], 16) >= 3 * 2**54}
    expected = errors | slow | slow_grpc | baseline
    assert 0 < len(expected) < len(duration_ms) == 141
    assert all(part - (expected - part) for part in (errors, slow, slow_grpc, baseline))

    registry = CollectorRegistry()
    result = _pipeline(store, _sampler(CAPTURE_POLICIES, registry)).run_once(force=True)

    assert (result.analysed, result.dropped) == (141, 141 - len(expected))
    assert _ids(store, "SELECT DISTINCT TraceId FROM otel_traces") == expected
    # Kept traces stay whole; every trace keeps its summary with the decision; analysed spans of kept ones only.
    kept_counts = {trace: n for trace, n in spans_before if trace in expected}
    assert dict(store.query_rows("SELECT TraceId, count() FROM otel_traces GROUP BY TraceId")) == kept_counts
    assert dict(store.query_rows("SELECT TraceId, Sampled FROM hotspan_trace_summary FINAL")) == {
        trace: trace in expected for trace in duration_ms
    }
    assert _ids(store, "SELECT DISTINCT TraceId FROM hotspan_span_analysis") == expected
    assert _ids(store, "SELECT TraceId FROM otel_traces_trace_id_ts") == expected
    # RED (fed at insert) and the service graph (paired before the decision) count every trace.
    assert store.query_rows(RED) == red_before
    assert sorted(store.query_rows(GRAPH)) == graph_before != []
    # Example traces offered for an edge are kept ones (a dropped trace cannot be opened).
    edges = store.query_rows("SELECT DISTINCT Client, Server FROM hotspan_service_graph_edges")
    rollups = ClickHouseRollupReader(store)
    examples = {
        trace
        for client, server in edges
        for trace in rollups.edge_examples(client, server, 0, 2**62, tenant="default", limit=1000)["trace_id"]
    }
    assert examples and examples <= expected
    by_stage = stage_examples(query_room(store).analysis, AnalysisFilter(), tenant="default", examples=1000)
    assert by_stage and set().union(*by_stage.values()) <= expected
    assert _ids(store, "SELECT TraceId FROM hotspan_service_graph_edges") - expected
    # /metrics: each policy's votes and the final decisions.
    for name, kept in (("errors", errors), ("slow", slow), ("slow-grpc", slow_grpc), ("baseline", baseline)):
        votes = "hotspan_tail_sampling_decisions_total"
        assert _counter(registry, votes, policy=name, decision="keep") == len(kept)
        assert _counter(registry, votes, policy=name, decision="drop") == 141 - len(kept)
    assert _counter(registry, "hotspan_tail_sampling_traces_total", decision="keep") == len(expected)
    assert _counter(registry, "hotspan_tail_sampling_traces_total", decision="drop") == 141 - len(expected)
    # Nothing is due any more.
    assert _pipeline(store, _sampler(CAPTURE_POLICIES)).run_once(force=True).analysed == 0


def _trace(*, error: bool = False, end_ms: float = 50, attributes: dict[str, str] | None = None) -> list[Span]:
    return [
        Span("0000000000000001", "", "gateway", "POST /chat", 0, end_ms, "Server", attributes or {}, error=error),
        Span("0000000000000002", "0000000000000001", "agent", "plan", 5, end_ms - 5),
    ]


LATE = [Span("00000000000000aa", "0000000000000001", "agent", "late", 10, 20)]


def test_late_spans_follow_the_decision_from_the_cache_and_from_storage(store: ClickHouse, ingestor: Ingestor) -> None:
    dropped, kept = "d" * 32, "e" * 32
    store_spans(ingestor, dropped, _trace())
    store_spans(ingestor, kept, _trace(error=True))
    registry = CollectorRegistry()
    sampler = _sampler(
        {"policies": [{"name": "errors", "type": "status_code", "status_code": {"status_codes": ["ERROR"]}}]}, registry
    )
    pipeline = _pipeline(store, sampler)
    assert pipeline.run_once(force=True).dropped == 1
    assert sampler.cache.get("default", dropped) is False and sampler.cache.get("default", kept) is True

    # A late span of each: the dropped trace's is deleted unanalysed (cache hit), the kept trace is analysed again.
    store_spans(ingestor, dropped, LATE)
    store_spans(ingestor, kept, LATE)
    result = pipeline.run_once(force=True)
    assert (result.late_dropped, result.analysed, result.dropped) == (1, 1, 0)
    assert _ids(store, "SELECT DISTINCT TraceId FROM otel_traces") == {kept}
    assert store.query_rows("SELECT count() FROM otel_traces WHERE TraceId = {t:String}", {"t": kept}) == [(3,)]
    summaries = "SELECT TraceId, Sampled, SpanCount, AnalysedSpans FROM hotspan_trace_summary FINAL ORDER BY TraceId"
    assert store.query_rows(summaries) == [(dropped, False, 2, 3), (kept, True, 3, 3)]
    assert _counter(registry, "hotspan_tail_sampling_late_spans_dropped_total") == 1

    # Another late span, seen by a fresh pipeline without any sampler (a restart with sampling off): the stored
    # decision still applies, so half a trace never comes back.
    store_spans(ingestor, dropped, [Span("00000000000000bb", "0000000000000001", "agent", "later", 11, 21)])
    assert _pipeline(store, None).run_once(force=True).late_dropped == 1
    assert _ids(store, "SELECT DISTINCT TraceId FROM otel_traces") == {kept}
    assert store.query_rows(summaries)[0] == (dropped, False, 2, 4)
    # RED counted every span, late ones included: 2 + 1 + 1 of the dropped trace, 2 + 1 of the kept one.
    assert store.query_rows("SELECT sum(Calls) FROM hotspan_red_minutes") == [(7,)]


def test_baggage_attributes_rate_limits_per_tenant_and_composition(store: ClickHouse, ingestor: Ingestor) -> None:
    traces = {
        "a1" * 16: _trace(attributes={"tenant_id": "acme"}),
        "a2" * 16: _trace(attributes={"tenant_id": "acme"}),
        "a3" * 16: _trace(attributes={"tenant_id": "acme"}),
        "b1" * 16: _trace(attributes={"tenant_id": "bolt"}),
        "c1" * 16: _trace(attributes={"sample_policy": "debug-high", "tenant_id": "acme"}),
        "f1" * 16: _trace(end_ms=900, attributes={"tenant_id": "acme", "hotspan.hotspot": "true"}),
    }
    for trace_id, spans in traces.items():
        store_spans(ingestor, trace_id, spans)
    document = {
        "policies": [
            {
                "name": "debug",
                "type": "string_attribute",
                "string_attribute": {"key": "sample_policy", "values": ["debug-.*"], "enabled_regex_matching": True},
            },
            {
                "name": "slow-hotspot",
                "type": "and",
                "and": {
                    "and_sub_policy": [
                        {"name": "hot", "type": "hotspot"},
                        {"name": "slow", "type": "latency", "latency": {"threshold_ms": 500}},
                    ]
                },
            },
            # Two traces of two spans per second and request tenant; spent on every trace, in trace-ID order.
            {"name": "budget", "type": "rate_limiting", "rate_limiting": {"spans_per_second": 4}},
        ]
    }
    pipeline = _pipeline(store, _sampler(document))
    pipeline.run_once(force=True)

    kept = _ids(store, "SELECT DISTINCT TraceId FROM otel_traces")
    # acme: a1, a2 fill the budget; a3, c1 and f1 are over it, but c1 is a debug request and f1 a slow hotspot.
    assert kept == {"a1" * 16, "a2" * 16, "b1" * 16, "c1" * 16, "f1" * 16}
    flagged = store.query_rows("SELECT TraceId, HotspotCount FROM hotspan_trace_summary FINAL WHERE HotspotCount > 0")
    assert flagged == [("f1" * 16, 1)]


def test_without_policies_every_trace_is_kept(store: ClickHouse, ingestor: Ingestor) -> None:
    store_spans(ingestor, "d" * 32, _trace())
    result = _pipeline(store, None).run_once(force=True)
    assert (result.analysed, result.dropped) == (1, 0)
    assert store.query_rows("SELECT count() FROM otel_traces") == [(2,)]
    assert store.query_rows("SELECT Sampled FROM hotspan_trace_summary FINAL") == [(True,)]


def test_the_server_samples_by_its_setting_counts_on_metrics_and_keeps_red_exact(chdb_dsn: str, tmp_path: Path) -> None:
    policies = tmp_path / "tail.yaml"
    policies.write_text(
        "policies:\n  - {name: errors, type: status_code, status_code: {status_codes: [ERROR]}}\n", encoding="utf-8"
    )
    server = serve_in_process(chdb_dsn, tmp_path, tail_sampling_path=policies, trace_idle_s=0)
    try:
        dropped, kept = "d" * 32, "e" * 32
        body = {"resourceSpans": otlp_request(dropped, _trace())["resourceSpans"]}
        body["resourceSpans"] += otlp_request(kept, _trace(error=True))["resourceSpans"]
        assert httpx.post(f"{server.base_url}/v1/traces", json=body).status_code == 200

        def metric(name: str, **labels: str) -> float:
            text = httpx.get(f"{server.base_url}/metrics").text
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    if sample.name == name and sample.labels == labels:
                        return sample.value
            return 0.0

        deadline = time.monotonic() + 30
        while metric("hotspan_tail_sampling_traces_total", decision="drop") < 1:
            assert time.monotonic() < deadline, "the pipeline did not decide within 30 s"
            time.sleep(0.1)
        assert metric("hotspan_tail_sampling_traces_total", decision="keep") == 1
        assert metric("hotspan_tail_sampling_decisions_total", policy="errors", decision="drop") == 1
        deadline = time.monotonic() + 10
        while httpx.get(f"{server.base_url}/api/v1/traces/{dropped}").status_code != 404:
            assert time.monotonic() < deadline, "the dropped trace's spans were not deleted"
            time.sleep(0.1)
        assert httpx.get(f"{server.base_url}/api/v1/traces/{kept}").json()["span_count"] == 2
        # Counted, but no exemplar opens the dropped trace (issue 33): its spans are gone.
        openmetrics = {"Accept": "application/openmetrics-text; version=1.0.0"}
        text = httpx.get(f"{server.base_url}/metrics", headers=openmetrics).text
        named = {
            sample.exemplar.labels["trace_id"]
            for family in openmetrics_families(text)
            for sample in family.samples
            if sample.exemplar is not None
        }
        assert kept in named and dropped not in named
        window = {"start_ns": T0 - 3_600 * 10**9, "end_ns": T0 + 3_600 * 10**9, "group_by": "service"}
        red = httpx.get(f"{server.base_url}/api/v1/red", params=window).json()
        # Both traces' spans: 2 gateway calls (one failed), 2 agent calls.
        assert {(group["service"], group["calls"], group["errors"]) for group in red["groups"]} == {
            ("gateway", 2, 1),
            ("agent", 2, 0),
        }
    finally:
        server.stop()


def test_the_decision_cache_is_bounded_per_kind_and_forgets_the_least_recently_used() -> None:
    cache = DecisionCache(sampled_size=2, non_sampled_size=1)
    for trace in ("a", "b"):
        cache.put("default", trace, True)
    assert cache.get("default", "a") is True  # now "b" is the least recently used kept trace
    cache.put("default", "c", True)
    cache.put("default", "x", False)
    cache.put("default", "y", False)
    assert [cache.get("default", trace) for trace in ("a", "b", "c", "x", "y")] == [True, None, True, None, False]
    assert cache.get("other-tenant", "a") is None
    cache.put("default", "a", False)  # a decision moves between kinds, never held twice
    assert (cache.get("default", "a"), cache.get("default", "y")) == (False, None)
