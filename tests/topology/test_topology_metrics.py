"""The span, service-graph, stage and hotspot metrics on ``/metrics`` (processors.pipeline.trace_metrics): the
connectors' names and label values, and units that match the names (ms for span metrics, s for the rest)."""

from __future__ import annotations

import time
from collections.abc import Callable

import polars as pl
import pytest
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Exemplar
from topology_support import demo_batch, frame, run_pipeline, span, storage_of

from hotspan.metrics import exposition
from processors.pipeline import trace_metrics
from processors.pipeline.service_graph import service_graph
from processors.pipeline.trace_metrics import TraceMetrics
from storage.clickhouse import ClickHouse
from storage.rollup_sql import SPAN_BUCKETS_MS
from testkit import TRACES

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(registry: CollectorRegistry) -> Samples:
    """Every exposed sample as ``{(name, labels): value}``, parsed back from the text format."""
    text = generate_latest(registry).decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(got: Samples, name: str, **labels: str) -> float | None:
    return got.get((name, frozenset(labels.items())))


def total(got: Samples, name: str) -> float:
    return sum(v for (sample, _), v in got.items() if sample == name)


def test_span_metrics_use_connector_names_labels_and_milliseconds() -> None:
    registry = CollectorRegistry()
    metrics = TraceMetrics(registry)
    metrics.observe_spans(
        frame(
            span("a", "", "gw", "Server", name="chat", duration_ms=1),
            span("b", "", "gw", "Server", name="chat", duration_ms=900, error=True),
            span("c", "a", "gw", "SPAN_KIND_CLIENT", name="chat", duration_ms=20_000),
        )
    )
    got = samples(registry)
    error = {"service_name": "gw", "span_name": "chat", "span_kind": "SPAN_KIND_SERVER"}
    error["status_code"] = "STATUS_CODE_ERROR"
    assert value(got, "traces_span_metrics_calls_total", **error) == 1
    assert value(got, "traces_span_metrics_duration_milliseconds_sum", **error) == pytest.approx(900)
    assert value(got, "traces_span_metrics_duration_milliseconds_bucket", **error, le="800.0") == 0
    assert value(got, "traces_span_metrics_duration_milliseconds_bucket", **error, le="1000.0") == 1
    client = {"service_name": "gw", "span_name": "chat", "span_kind": "SPAN_KIND_CLIENT"}
    client["status_code"] = "STATUS_CODE_UNSET"
    assert value(got, "traces_span_metrics_duration_milliseconds_bucket", **client, le="15000.0") == 0
    assert value(got, "traces_span_metrics_duration_milliseconds_bucket", **client, le="+Inf") == 1
    buckets = {dict(labels)["le"] for name, labels in got if name.endswith("_bucket")}
    assert buckets == {repr(float(b)) for b in SPAN_BUCKETS_MS} | {"+Inf"}


def test_service_graph_metrics_are_in_seconds_with_connector_connection_types() -> None:
    registry = CollectorRegistry()
    metrics = TraceMetrics(registry)
    metrics.observe_service_graph(
        service_graph(
            frame(
                span("a", "", "gw", "Server", duration_ms=100),
                span("b", "a", "gw", "Client", duration_ms=50, error=True),
                span("c", "b", "engine", "Server", duration_ms=30),
                span("d", "a", "gw", "Client", duration_ms=5, db__system="redis"),
                span("e", "a", "gw", "Client", duration_ms=5),
            )
        )
    )
    got = samples(registry)
    plain = {"client": "gw", "server": "engine", "connection_type": ""}
    assert value(got, "traces_service_graph_request_total", **plain) == 1
    assert value(got, "traces_service_graph_request_failed_total", **plain) == 1
    assert value(got, "traces_service_graph_request_client_seconds_sum", **plain) == pytest.approx(0.05)
    assert value(got, "traces_service_graph_request_server_seconds_sum", **plain) == pytest.approx(0.03)
    assert value(got, "traces_service_graph_request_server_seconds_bucket", **plain, le="0.05") == 1
    database = {"client": "gw", "server": "redis", "connection_type": "database"}
    assert value(got, "traces_service_graph_request_total", **database) == 1
    assert value(got, "traces_service_graph_request_server_seconds_count", **database) is None  # no server span
    user = {"client": "user", "server": "gw", "connection_type": "virtual_node"}
    assert value(got, "traces_service_graph_request_server_seconds_sum", **user) == pytest.approx(0.1)
    assert value(got, "traces_service_graph_unpaired_spans_total", client="gw", server="") == 1


def test_pipeline_fills_stage_and_hotspot_metrics(store: ClickHouse) -> None:
    registry = CollectorRegistry()
    metrics = TraceMetrics(registry)
    storage = storage_of(store)
    storage.writer.write(demo_batch(TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"))
    assert run_pipeline(storage, metrics) == 141
    got = samples(registry)
    assert total(got, "traces_span_metrics_calls_total") == 547
    staged = {dict(labels)["service"] for name, labels in got if name == "hotspan_stage_duration_seconds_count"}
    roots = dict(store.query_rows("SELECT RootService, count() FROM hotspan_trace_summary FINAL GROUP BY 1"))
    assert staged == set(roots)
    stage_seconds = total(got, "hotspan_stage_duration_seconds_sum")
    e2e_seconds = store.query_rows("SELECT sum(DurationNs) FROM hotspan_trace_summary FINAL")[0][0] / 1e9
    assert stage_seconds == pytest.approx(e2e_seconds)  # stage times sum to each request's duration
    hotspots = store.query_rows(
        "SELECT ServiceName, HotspotReason, count() FROM hotspan_span_analysis FINAL WHERE IsHotspot GROUP BY 1, 2"
    )
    assert hotspots
    for service, reason, count in hotspots:
        assert value(got, "hotspan_hotspot_spans_total", service_name=service, reason=reason) == count


def test_series_beyond_the_cardinality_limit_fold_into_one_overflow_series() -> None:
    """The spanmetrics connector's ``aggregation_cardinality_limit``: the first label sets keep their series (the
    busiest first within a batch), later ones count into ``otel_metric_overflow="true"``, and a series once placed
    stays where it is."""
    registry = CollectorRegistry()
    metrics = TraceMetrics(registry, limit=2)
    busy = [span(f"b{i}", "", "gw", "Server", name="busy", duration_ms=5) for i in range(3)]
    metrics.observe_spans(frame(*busy, span("x", "", "gw", "Server", name="rare", duration_ms=5)))
    metrics.observe_spans(frame(span("y", "", "gw", "Server", name="late", duration_ms=5)))
    metrics.observe_spans(frame(span("z", "", "gw", "Server", name="rare", duration_ms=5)))
    got = samples(registry)
    kept = {"service_name": "gw", "span_kind": "SPAN_KIND_SERVER", "status_code": "STATUS_CODE_UNSET"}
    assert value(got, "traces_span_metrics_calls_total", **kept, span_name="busy") == 3
    assert value(got, "traces_span_metrics_calls_total", **kept, span_name="rare") == 2
    assert value(got, "traces_span_metrics_calls_total", otel_metric_overflow="true") == 1
    assert value(got, "traces_span_metrics_duration_milliseconds_count", otel_metric_overflow="true") == 1
    assert total(got, "traces_span_metrics_calls_total") == 6
    assert len({labels for name, labels in got if name == "traces_span_metrics_calls_total"}) == 3


def exemplars(registry: CollectorRegistry, name: str) -> dict[tuple[frozenset[tuple[str, str]], str], Exemplar]:
    """Every exemplar of histogram ``name`` as ``{(series labels without le, le): exemplar}``, parsed back from the
    OpenMetrics format."""
    text = openmetrics_latest(registry).decode()
    return {
        (frozenset((k, v) for k, v in sample.labels.items() if k != "le"), sample.labels["le"]): sample.exemplar
        for family in openmetrics_families(text)
        if family.name == name
        for sample in family.samples
        if sample.exemplar is not None
    }


def test_duration_buckets_carry_the_slowest_observation_as_a_trace_id_exemplar() -> None:
    """Each bucket's exemplar is the latest batch's slowest observation in it, with its trace and span IDs, a
    value in the metric's unit and the time it was counted; the overflow series keeps the slowest of the label sets
    it folded in; the classic format shows none."""
    registry = CollectorRegistry()
    metrics = TraceMetrics(registry, limit=1)
    before_s = time.time()
    metrics.observe_spans(
        frame(
            span("a", "", "gw", "Server", trace="t1", name="chat", duration_ms=3),
            span("b", "", "gw", "Server", trace="t2", name="chat", duration_ms=3.5),
            span("c", "", "gw", "Server", trace="t3", name="chat", duration_ms=900),
            span("d", "", "gw", "Server", trace="t4", name="rare", duration_ms=7.5),
            span("f", "", "gw", "Server", trace="t6", name="other", duration_ms=7),
        )
    )
    metrics.observe_spans(frame(span("e", "", "gw", "Server", trace="t5", name="chat", duration_ms=1)))
    got = exemplars(registry, "traces_span_metrics_duration_milliseconds")
    chat = frozenset(
        {
            "service_name": "gw",
            "span_name": "chat",
            "span_kind": "SPAN_KIND_SERVER",
            "status_code": "STATUS_CODE_UNSET",
        }.items()
    )
    overflow = frozenset({("otel_metric_overflow", "true")})
    assert set(got) == {(chat, "2.0"), (chat, "4.0"), (chat, "1000.0"), (overflow, "8.0")}
    slowest = got[(chat, "4.0")]
    assert slowest.labels == {"trace_id": "t2".ljust(32, "0"), "span_id": "b".ljust(16, "0")}
    assert slowest.value == pytest.approx(3.5)
    # The exposition prints seconds; parsed back they may differ from the float in the last digits.
    assert before_s - 0.001 <= float(slowest.timestamp) <= time.time() + 0.001
    assert got[(chat, "2.0")].labels["trace_id"] == "t5".ljust(32, "0")
    assert got[(overflow, "8.0")].labels["trace_id"] == "t4".ljust(32, "0")
    assert " # {" not in generate_latest(registry).decode()


SPAN_DURATION = "traces_span_metrics_duration_milliseconds"


def test_stage_exemplars_name_the_request_trace() -> None:
    registry = CollectorRegistry()
    metrics = TraceMetrics(registry)
    stages = pl.DataFrame(
        {"trace_id": ["t1".ljust(32, "0")], "service": ["gw"], "stage": ["llm"], "duration_ns": [300_000_000]}
    )
    metrics.observe_stages(stages)
    (exemplar,) = exemplars(registry, "hotspan_stage_duration_seconds").values()
    assert exemplar.labels == {"trace_id": "t1".ljust(32, "0")}
    assert exemplar.value == pytest.approx(0.3)


def test_traces_tail_sampling_drops_are_counted_but_never_an_exemplar() -> None:
    """An exemplar opens its trace: one tail sampling dropped is gone, so the slowest *stored* observation stands for
    its bucket, and a bucket of dropped traces only has none; the counts hold every trace."""
    registry = CollectorRegistry()
    metrics = TraceMetrics(registry)
    dropped = frozenset({"t1".ljust(32, "0"), "t3".ljust(32, "0")})
    metrics.observe_spans(
        frame(
            span("a", "", "gw", "Server", trace="t1", name="chat", duration_ms=3.9),
            span("b", "", "gw", "Server", trace="t2", name="chat", duration_ms=3.5),
            span("c", "", "gw", "Server", trace="t3", name="chat", duration_ms=900),
        ),
        dropped,
    )
    got = {le: exemplar.labels["trace_id"] for (_, le), exemplar in exemplars(registry, SPAN_DURATION).items()}
    assert got == {"4.0": "t2".ljust(32, "0")}
    counts = text_string_to_metric_families(generate_latest(registry).decode())
    family = next(f for f in counts if f.name == SPAN_DURATION)
    assert next(s.value for s in family.samples if s.name.endswith("_count")) == 3
    stages = pl.DataFrame(
        {"trace_id": ["t3".ljust(32, "0")], "service": ["gw"], "stage": ["llm"], "duration_ns": [300_000_000]}
    )
    metrics.observe_stages(stages, dropped)
    assert exemplars(registry, "hotspan_stage_duration_seconds") == {}


@pytest.mark.parametrize("encode", [generate_latest, openmetrics_latest], ids=["text-0.0.4", "openmetrics"])
def test_the_parts_streamed_one_by_one_are_what_prometheus_client_writes_whole(
    encode: Callable[[CollectorRegistry], bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/metrics`` writes these families part by part after the registry's (``hotspan.metrics.exposition``): byte
    for byte what the same encoder writes with every family registered, over every family, the overflow series,
    escaped label values, exemplars (OpenMetrics) and empty families; each part holds at most
    ``EXPOSITION_PART_SERIES`` series."""
    monkeypatch.setattr(trace_metrics, "EXPOSITION_PART_SERIES", 2)
    streamed_registry, whole_registry = CollectorRegistry(), CollectorRegistry()
    for registry in (streamed_registry, whole_registry):
        Gauge("hotspan_role", "What this Hotspan process runs", ["role"], registry=registry).labels(role="all").set(1)
    metrics = TraceMetrics(None, limit=3)
    whole_registry.register(metrics)

    def streamed() -> list[bytes]:
        return list(exposition(encode, streamed_registry, [metrics]))

    assert b"".join(streamed()) == encode(whole_registry)  # every family empty
    odd = 'gw "eu"\\ \n\u00e9'
    metrics.observe_spans(
        frame(
            *(span(f"s{i}", "", odd, "Server", name=f"op{i}", duration_ms=10.0**i) for i in range(6)),
            span("c", "s1", "gw", "Client", name="call", duration_ms=3, error=True),
        )
    )
    metrics.observe_service_graph(
        service_graph(
            frame(
                span("a", "", "gw", "Server", duration_ms=100),
                span("b", "a", "gw", "Client", duration_ms=50, error=True),
                span("c", "b", odd, "Server", duration_ms=30),
            )
        )
    )
    metrics.observe_hotspots([(odd, "", 2), ("gw", "slow", 1)])
    pieces = streamed()
    assert b"".join(pieces) == encode(whole_registry)
    # The span counter: four series (three and the overflow one) in two parts, the second without a header.
    first = next(i for i, piece in enumerate(pieces) if b"# TYPE traces_span_metrics_calls" in piece)
    assert [pieces[first].count(b"\n"), pieces[first + 1].count(b"\n")] == [2 + 2, 2]
    assert pieces[first + 1].startswith(b"traces_span_metrics_calls_total{")
