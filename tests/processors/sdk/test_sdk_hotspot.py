"""HotspotSpanProcessor on the real SDK: exported spans carry the flag, p95 accuracy, bounds, threads."""

import random
import threading
from collections.abc import Iterator

import pytest
from opentelemetry import baggage, context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, SpanProcessor, SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from sdk_support import BASE_NS, Metrics, counter_values, end_span_after, flagged

from hotspan_sdk import AdaptiveConfig, BaggageSpanProcessor, ConfigError, HotspotSpanProcessor, StaticRule

METRIC = "hotspan.hotspot.spans"
_OPEN_PROVIDERS: list[TracerProvider] = []


@pytest.fixture(autouse=True)
def _shutdown_providers() -> Iterator[None]:
    """Stop every provider a test built (and with it any BatchSpanProcessor worker thread)."""
    yield
    while _OPEN_PROVIDERS:
        _OPEN_PROVIDERS.pop().shutdown()


def pipeline(
    processor_factory: "type[SimpleSpanProcessor] | type[BatchSpanProcessor]" = SimpleSpanProcessor,
    service: str = "agent",
    limits: SpanLimits | None = None,
    **hotspot_kwargs: object,
) -> tuple[TracerProvider, InMemorySpanExporter, HotspotSpanProcessor]:
    exporter = InMemorySpanExporter()
    hotspot = HotspotSpanProcessor(processor_factory(exporter), **hotspot_kwargs)  # type: ignore[arg-type]
    provider = TracerProvider(resource=Resource.create({"service.name": service}), span_limits=limits)
    provider.add_span_processor(hotspot)
    _OPEN_PROVIDERS.append(provider)
    return provider, exporter, hotspot


@pytest.mark.parametrize("processor_factory", [SimpleSpanProcessor, BatchSpanProcessor])
def test_exported_span_carries_static_flag(processor_factory: type, metrics: Metrics) -> None:
    provider, exporter, _ = pipeline(
        processor_factory, rules=[StaticRule(threshold_ms=100.0, name="llm.*")], meter_provider=metrics.provider
    )
    tracer = provider.get_tracer("test")
    end_span_after(tracer, "llm.request", 250.5)
    end_span_after(tracer, "llm.request", 99.0)
    end_span_after(tracer, "tool.call", 900.0)  # no rule matches this name
    provider.force_flush()
    spans = {span.attributes.get("hotspan.hotspot.duration_ms"): span for span in exporter.get_finished_spans()}
    assert len(exporter.get_finished_spans()) == 3
    slow = spans[250.5]
    assert dict(slow.attributes) == {
        "hotspan.hotspot": True,
        "hotspan.hotspot.reason": "static",
        "hotspan.hotspot.threshold_ms": 100.0,
        "hotspan.hotspot.duration_ms": 250.5,
    }
    assert len(flagged(exporter.get_finished_spans())) == 1
    assert counter_values(metrics.reader, METRIC) == {(("service.name", "agent"), ("span.name", "llm.request")): 1}


def test_first_matching_rule_wins_and_service_globs_apply() -> None:
    rules = [
        StaticRule(threshold_ms=500.0, name="llm.request", service="gateway"),
        StaticRule(threshold_ms=50.0, name="llm.*", service="agent*"),
        StaticRule(threshold_ms=10.0),
    ]
    provider, exporter, _ = pipeline(rules=rules, service="agent-1")
    tracer = provider.get_tracer("test")
    end_span_after(tracer, "llm.request", 60.0)  # second rule: 60 > 50
    end_span_after(tracer, "db.query", 11.0)  # third rule: 11 > 10
    thresholds = sorted(span.attributes["hotspan.hotspot.threshold_ms"] for span in exporter.get_finished_spans())
    assert thresholds == [10.0, 50.0]


def test_threshold_is_strict() -> None:
    provider, exporter, _ = pipeline(rules=[StaticRule(threshold_ms=100.0)])
    end_span_after(provider.get_tracer("test"), "op", 100.0)
    assert flagged(exporter.get_finished_spans()) == []


def test_flagged_copy_keeps_everything_an_exporter_reads() -> None:
    provider, exporter, _ = pipeline(
        rules=[StaticRule(threshold_ms=1.0)], limits=SpanLimits(max_span_attributes=2, max_events=1)
    )
    tracer = provider.get_tracer("test-scope", "1.2.3")
    with tracer.start_as_current_span("parent") as parent:
        span = tracer.start_span(
            "child",
            kind=SpanKind.CLIENT,
            attributes={"a": 1, "b": 2, "c": 3},  # "a" dropped by the limit of 2
            links=[Link(parent.get_span_context(), {"why": "test"})],
            start_time=BASE_NS,
        )
        span.add_event("first")  # dropped by the limit of 1: the oldest goes
        span.add_event("second")
        span.set_status(Status(StatusCode.ERROR, "boom"))
        span.end(end_time=BASE_NS + 5_000_000)
    child = next(s for s in exporter.get_finished_spans() if s.name == "child")
    assert child.attributes["hotspan.hotspot"] is True
    assert {k: child.attributes[k] for k in ("b", "c")} == {"b": 2, "c": 3}
    assert child.dropped_attributes == 1
    assert [event.name for event in child.events] == ["second"]
    assert child.dropped_events == 1
    assert child.links[0].context == parent.get_span_context()
    assert child.dropped_links == 0
    assert child.kind is SpanKind.CLIENT
    assert child.status.status_code is StatusCode.ERROR
    assert child.status.description == "boom"
    assert child.parent == parent.get_span_context()
    assert child.context == span.get_span_context()
    assert (child.start_time, child.end_time) == (BASE_NS, BASE_NS + 5_000_000)
    assert child.resource.attributes["service.name"] == "agent"
    assert child.instrumentation_scope is not None
    assert (child.instrumentation_scope.name, child.instrumentation_scope.version) == ("test-scope", "1.2.3")
    assert '"hotspan.hotspot": true' in child.to_json()


def test_unflagged_spans_pass_through_unchanged() -> None:
    provider, exporter, _ = pipeline(rules=[StaticRule(threshold_ms=1000.0)])
    with provider.get_tracer("test").start_as_current_span("fast", attributes={"k": "v"}):
        pass
    (span,) = exporter.get_finished_spans()
    assert dict(span.attributes) == {"k": "v"}
    assert type(span).__name__ == "ReadableSpan"


def test_sdk_freezes_span_before_on_ending() -> None:
    """Why the flag travels as a copy: on this SDK, _on_ending cannot annotate the exported span.

    If this starts failing, the SDK has made OnEnding writable (open-telemetry/opentelemetry-python#5614)
    and HotspotSpanProcessor could set attributes there instead of copying.
    """

    class AnnotateOnEnding(SpanProcessor):
        def _on_ending(self, span) -> None:  # type: ignore[no-untyped-def]
            span.set_attribute("late", True)

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(AnnotateOnEnding())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("test").start_as_current_span("op"):
        pass
    assert "late" not in exporter.get_finished_spans()[0].attributes


def test_every_hook_is_forwarded_to_the_wrapped_processor() -> None:
    exporter = InMemorySpanExporter()
    inner = SynchronousMultiSpanProcessor()
    inner.add_span_processor(BaggageSpanProcessor(["tenant_id"]))  # observable on_start
    inner.add_span_processor(BatchSpanProcessor(exporter))  # observable on_end/force_flush/shutdown
    provider = TracerProvider()
    provider.add_span_processor(HotspotSpanProcessor(inner, rules=[StaticRule(threshold_ms=1e9)]))
    token = context.attach(baggage.set_baggage("tenant_id", "acme"))
    try:
        with provider.get_tracer("test").start_as_current_span("op"):
            pass
    finally:
        context.detach(token)
    assert exporter.get_finished_spans() == ()  # still queued in the batch processor
    assert provider.force_flush()
    assert exporter.get_finished_spans()[0].attributes["tenant_id"] == "acme"
    provider.shutdown()
    # The exporter was shut down through the wrapper: it now refuses spans.
    assert exporter.export(list(exporter.get_finished_spans())) is SpanExportResult.FAILURE


def lognormal_workload(
    hotspot_kwargs: dict[str, object], spans: int, seed: int = 3
) -> tuple[list[float], InMemorySpanExporter, TracerProvider]:
    # A queue as long as the workload: the default 2048 drops spans when a loaded machine exports slowly.
    provider, exporter, _ = pipeline(
        lambda e: BatchSpanProcessor(e, max_queue_size=spans),  # type: ignore[arg-type]
        **hotspot_kwargs,
    )
    tracer = provider.get_tracer("test")
    rng = random.Random(seed)
    durations = [rng.lognormvariate(4.0, 0.6) for _ in range(spans)]  # median ~55 ms
    for duration in durations:
        end_span_after(tracer, "llm.request", duration)
    provider.force_flush()
    return durations, exporter, provider


def test_adaptive_p95_flags_about_five_percent_of_a_steady_workload(metrics: Metrics) -> None:
    config = AdaptiveConfig(window=2048, min_samples=200)
    _, exporter, _ = lognormal_workload({"adaptive": config, "meter_provider": metrics.provider}, spans=20_000)
    exported = exporter.get_finished_spans()
    assert len(exported) == 20_000
    hot = flagged(exported)
    fraction = len(hot) / len(exported)
    assert 0.03 <= fraction <= 0.07, fraction
    assert all(span.attributes["hotspan.hotspot.reason"] == "p95" for span in hot)
    assert all(
        span.attributes["hotspan.hotspot.duration_ms"] > span.attributes["hotspan.hotspot.threshold_ms"] for span in hot
    )
    # The threshold learned is the workload's p95: exp(4.0 + 1.645 * 0.6) ~ 146 ms.
    thresholds = [span.attributes["hotspan.hotspot.threshold_ms"] for span in hot]
    assert 135 <= sorted(thresholds)[len(thresholds) // 2] <= 160
    assert counter_values(metrics.reader, METRIC) == {
        (("service.name", "agent"), ("span.name", "llm.request")): len(hot)
    }


def test_adaptive_flags_an_injected_slow_operation() -> None:
    provider, exporter, _ = pipeline(adaptive=True)
    tracer = provider.get_tracer("test")
    rng = random.Random(5)
    for _ in range(1000):
        end_span_after(tracer, "tool.call", rng.lognormvariate(3.0, 0.3))  # ~20 ms
    exporter.clear()
    end_span_after(tracer, "tool.call", 400.0)  # an injected 20x slowdown
    (span,) = exporter.get_finished_spans()
    assert span.attributes["hotspan.hotspot"] is True
    assert span.attributes["hotspan.hotspot.reason"] == "p95"
    assert span.attributes["hotspan.hotspot.threshold_ms"] < 40.0


def test_adaptive_waits_for_min_samples() -> None:
    provider, exporter, _ = pipeline(adaptive=AdaptiveConfig(window=512, min_samples=100, refresh_every=10))
    tracer = provider.get_tracer("test")
    for _ in range(99):
        end_span_after(tracer, "op", 10.0)
    end_span_after(tracer, "op", 10_000.0)  # the 100th span: not enough history before it
    assert flagged(exporter.get_finished_spans()) == []
    for _ in range(10):
        end_span_after(tracer, "op", 10.0)
    end_span_after(tracer, "op", 10_000.0)
    assert len(flagged(exporter.get_finished_spans())) == 1


def test_equal_durations_are_never_above_their_own_p95() -> None:
    provider, exporter, _ = pipeline(adaptive=AdaptiveConfig(min_samples=10, refresh_every=5))
    tracer = provider.get_tracer("test")
    for _ in range(500):
        end_span_after(tracer, "op", 12.5)
    assert flagged(exporter.get_finished_spans()) == []


def test_static_rule_wins_over_adaptive_for_its_keys() -> None:
    provider, exporter, _ = pipeline(rules=[StaticRule(threshold_ms=1000.0, name="llm.*")], adaptive=True)
    tracer = provider.get_tracer("test")
    for index in range(1000):
        end_span_after(tracer, "llm.request", 900.0 if index % 10 else 10.0)
    assert flagged(exporter.get_finished_spans()) == []


def test_keys_and_memory_stay_bounded(metrics: Metrics) -> None:
    provider, _, hotspot = pipeline(adaptive=True, max_keys=64, meter_provider=metrics.provider)
    tracer = provider.get_tracer("test")
    rng = random.Random(9)
    for index in range(5_000):
        end_span_after(tracer, f"op-{index % 2_500}", rng.lognormvariate(2.0, 1.0))
    assert hotspot.tracked_keys <= 64
    assert hotspot.tracked_buckets <= 64 * 2 * 600


def test_eight_threads_lose_no_flags_or_counts(metrics: Metrics) -> None:
    provider, exporter, _ = pipeline(
        rules=[StaticRule(threshold_ms=100.0, name="static.*")],
        adaptive=AdaptiveConfig(min_samples=50, refresh_every=16),
        meter_provider=metrics.provider,
    )
    tracer = provider.get_tracer("test")
    per_thread = 1_500
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def work(worker: int) -> None:
        try:
            rng = random.Random(worker)
            barrier.wait()
            for index in range(per_thread):
                slow = index % 10 == 0
                end_span_after(tracer, f"static.{worker % 2}", 150.0 if slow else 50.0)
                end_span_after(tracer, f"adaptive.{worker % 3}", rng.lognormvariate(3.0, 0.5))
        except BaseException as error:  # surfaced by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    exported = exporter.get_finished_spans()
    assert len(exported) == 8 * per_thread * 2
    hot = flagged(exported)
    static_hot = [span for span in hot if span.name.startswith("static.")]
    assert len(static_hot) == 8 * per_thread // 10
    counts = counter_values(metrics.reader, METRIC)
    assert sum(counts.values()) == len(hot)
    for attributes, count in counts.items():
        name = dict(attributes)["span.name"]
        assert count == sum(1 for span in hot if span.name == name)


def test_invalid_configuration_lists_every_problem() -> None:
    with pytest.raises(ConfigError) as caught:
        HotspotSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), rules=["slow"], max_keys=0)  # type: ignore[list-item]
    assert [issue.key for issue in caught.value.issues] == ["rules[0]", "max_keys"]
    with pytest.raises(ConfigError, match="give static rules, adaptive mode, or both"):
        HotspotSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()))
    with pytest.raises(ConfigError) as caught:
        StaticRule(threshold_ms=-1, name="")
    assert [issue.key for issue in caught.value.issues] == ["threshold_ms", "name"]
    with pytest.raises(ConfigError) as caught:
        AdaptiveConfig(quantile=1.0, window=100, min_samples=60, refresh_every=0, relative_accuracy=0.9)
    assert [issue.key for issue in caught.value.issues] == [
        "quantile",
        "refresh_every",
        "min_samples",
        "relative_accuracy",
    ]
