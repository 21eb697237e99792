"""BaggageSampler decisions: policies, parent handling, consistency across instances, baggage encodings."""

import math
import random

import pytest
from opentelemetry import baggage, context
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, SamplingResult
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from hotspan_sdk import BaggageSampler

PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])
POLICIES = {
    "default_ratio": 0.0,
    "policies": [
        {"name": "debug", "match": {"sample_policy": "debug-high"}, "sample": "always"},
        {"name": "off", "match": {"sample_policy": "off"}, "sample": "never"},
        {"match": {"tenant_id": "staging-*"}, "ratio": 0.5, "channel": "gray"},
    ],
}
HALF = 1 << 55  # the rejection threshold of ratio 0.5
SPAN_ID = 0x00F067AA0BA902B7


def incoming(
    baggage_header: str | None = None,
    trace_id: int | None = None,
    sampled: bool = False,
    tracestate: str | None = None,
) -> Context:
    """The context a server extracts from request headers (traceparent only when trace_id is given)."""
    headers: dict[str, str] = {}
    if baggage_header is not None:
        headers["baggage"] = baggage_header
    if trace_id is not None:
        headers["traceparent"] = f"00-{trace_id:032x}-{SPAN_ID:016x}-{'01' if sampled else '00'}"
    if tracestate is not None:
        headers["tracestate"] = tracestate
    return PROPAGATOR.extract(headers, context=Context())


def decide(sampler: BaggageSampler, context: Context, trace_id: int) -> SamplingResult:
    return sampler.should_sample(context, trace_id, "op")


def ot(result: SamplingResult) -> str | None:
    return None if result.trace_state is None else result.trace_state.get("ot")


def random_trace_ids(count: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.getrandbits(128) | 1 for _ in range(count)]


@pytest.fixture
def sampler() -> BaggageSampler:
    return BaggageSampler.from_config(POLICIES)


def test_debug_high_always_samples_even_at_ratio_zero(sampler: BaggageSampler) -> None:
    result = decide(sampler, incoming("sample_policy=debug-high"), 0x1)
    assert result.decision is Decision.RECORD_AND_SAMPLE
    assert dict(result.attributes) == {"hotspan.sampling.policy": "debug", "hotspan.sampling.channel": "default"}
    assert ot(result) == "th:0"


def test_debug_high_starts_recording_under_an_unsampled_parent(sampler: BaggageSampler) -> None:
    result = decide(sampler, incoming("sample_policy=debug-high", trace_id=0x1, sampled=False), 0x1)
    assert result.decision is Decision.RECORD_AND_SAMPLE
    assert ot(result) == "th:0"


@pytest.mark.parametrize("parent_sampled", [None, False])
def test_off_drops(sampler: BaggageSampler, parent_sampled: bool | None) -> None:
    trace_id = (1 << 56) - 1  # randomness that any ratio would keep
    parent = {} if parent_sampled is None else {"trace_id": trace_id, "sampled": parent_sampled}
    result = decide(sampler, incoming("sample_policy=off,tenant_id=staging-eu", **parent), trace_id)  # type: ignore[arg-type]
    assert result.decision is Decision.DROP
    assert ot(result) is None


def test_sampled_parent_wins_over_off(sampler: BaggageSampler) -> None:
    """Documented choice: dropping under a sampled parent would cut a recorded trace in two."""
    context = incoming("sample_policy=off", trace_id=(1 << 56) - 1, sampled=True, tracestate="ot=th:8,vendor=v")
    result = decide(sampler, context, (1 << 56) - 1)
    assert result.decision is Decision.RECORD_AND_SAMPLE
    assert dict(result.attributes) == {"hotspan.sampling.policy": "off", "hotspan.sampling.channel": "default"}
    assert result.trace_state is not None
    assert result.trace_state.to_header() == "ot=th:8,vendor=v"


def test_half_ratio_tenant_keeps_half_and_two_instances_agree() -> None:
    service_a = BaggageSampler.from_config(POLICIES)
    service_b = BaggageSampler.from_config(POLICIES)
    trace_ids = random_trace_ids(4000, seed=42)
    context = incoming("tenant_id=staging-eu")
    decisions_a = [decide(service_a, context, trace_id) for trace_id in trace_ids]
    decisions_b = [decide(service_b, context, trace_id) for trace_id in trace_ids]
    kept_a = [result.decision.is_sampled() for result in decisions_a]
    assert kept_a == [result.decision.is_sampled() for result in decisions_b]
    assert kept_a == [(trace_id & ((1 << 56) - 1)) >= HALF for trace_id in trace_ids]
    fraction = sum(kept_a) / len(kept_a)
    assert abs(fraction - 0.5) <= 3 * math.sqrt(0.25 / len(kept_a)), fraction
    for result in decisions_a:
        if result.decision.is_sampled():
            assert ot(result) == "th:8"
            assert result.attributes["hotspan.sampling.channel"] == "gray"
            assert result.attributes["hotspan.sampling.policy"] == "tenant_id=staging-*"


def test_downstream_instance_agrees_with_propagated_decision() -> None:
    """Service B decides from what service A propagated: traceparent, tracestate and baggage."""
    service_a = BaggageSampler.from_config(POLICIES)
    service_b = BaggageSampler.from_config(POLICIES)
    for trace_id in random_trace_ids(2000, seed=7):
        result_a = decide(service_a, incoming("tenant_id=staging-eu"), trace_id)
        headers: dict[str, str] = {}
        span_context = SpanContext(
            trace_id,
            SPAN_ID,
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED if result_a.decision.is_sampled() else TraceFlags.DEFAULT),
            trace_state=result_a.trace_state,
        )
        outgoing = baggage.set_baggage("tenant_id", "staging-eu", set_span_in_context(NonRecordingSpan(span_context)))
        PROPAGATOR.inject(headers, context=outgoing)
        result_b = decide(service_b, PROPAGATOR.extract(headers, context=Context()), trace_id)
        assert result_b.decision == result_a.decision
        assert ot(result_b) == ot(result_a)


def test_explicit_rv_is_the_randomness_when_present(sampler: BaggageSampler) -> None:
    low_trace_id, high_trace_id = 0x1, (1 << 56) - 1
    keep = incoming("tenant_id=staging-x", trace_id=low_trace_id, tracestate="ot=rv:ffffffffffffff")
    result = decide(sampler, keep, low_trace_id)
    assert result.decision is Decision.RECORD_AND_SAMPLE
    assert ot(result) == "th:8;rv:ffffffffffffff"  # rv is propagated verbatim
    drop = incoming("tenant_id=staging-x", trace_id=high_trace_id, tracestate="ot=rv:00000000000001")
    result = decide(sampler, drop, high_trace_id)
    assert result.decision is Decision.DROP
    assert ot(result) == "rv:00000000000001"


def test_percent_encoded_baggage_matches(sampler: BaggageSampler) -> None:
    assert decide(sampler, incoming("sample_policy=debug%2Dhigh"), 0x1).decision is Decision.RECORD_AND_SAMPLE
    result = decide(sampler, incoming("tenant_id=staging%2Deu%20west"), (1 << 56) - 1)
    assert result.attributes["hotspan.sampling.channel"] == "gray"


def test_entries_with_properties_match_on_their_value(sampler: BaggageSampler) -> None:
    assert decide(sampler, incoming("sample_policy=debug-high;ttl=60"), 0x1).decision is Decision.RECORD_AND_SAMPLE
    off = incoming("sample_policy=off ; prop=1, tenant_id=staging-eu;a;b=2")
    assert decide(sampler, off, (1 << 56) - 1).decision is Decision.DROP
    result = decide(sampler, incoming("tenant_id=staging-eu;region=eu"), (1 << 56) - 1)
    assert result.attributes["hotspan.sampling.channel"] == "gray"


def test_no_match_behaves_like_parent_based_ratio() -> None:
    sampler = BaggageSampler.from_config({"default_ratio": 0.25, "policies": POLICIES["policies"]})
    trace_ids = random_trace_ids(4000, seed=3)
    kept = [decide(sampler, incoming("tenant_id=prod"), trace_id).decision.is_sampled() for trace_id in trace_ids]
    assert abs(sum(kept) / len(kept) - 0.25) <= 3 * math.sqrt(0.25 * 0.75 / len(kept))
    root = decide(sampler, Context(), (1 << 56) - 1)
    assert root.decision is Decision.RECORD_AND_SAMPLE
    assert ot(root) == "th:c"
    assert dict(root.attributes) == {}  # unmatched spans carry no policy attributes
    # Children follow their parent whatever their own randomness says.
    assert decide(sampler, incoming(trace_id=0x1, sampled=True), 0x1).decision is Decision.RECORD_AND_SAMPLE
    unsampled_child = decide(sampler, incoming(trace_id=(1 << 56) - 1, sampled=False), (1 << 56) - 1)
    assert unsampled_child.decision is Decision.DROP


def test_default_ratio_one_samples_every_root_with_th_zero() -> None:
    result = decide(BaggageSampler(), Context(), 0x0)
    assert result.decision is Decision.RECORD_AND_SAMPLE
    assert ot(result) == "th:0"


def test_inconsistent_remote_threshold_is_erased() -> None:
    sampler = BaggageSampler()
    low_trace_id = 0x1  # R = 1 < th:8 although the parent claims it sampled
    result = decide(sampler, incoming(trace_id=low_trace_id, sampled=True, tracestate="ot=th:8;rv:zz"), low_trace_id)
    assert result.decision is Decision.RECORD_AND_SAMPLE
    assert ot(result) == "rv:zz"
    consistent_parent = incoming(trace_id=(1 << 56) - 1, sampled=True, tracestate="ot=th:8")
    assert ot(decide(sampler, consistent_parent, (1 << 56) - 1)) == "th:8"


def test_dropped_span_carries_no_threshold() -> None:
    sampler = BaggageSampler.from_config(POLICIES)
    result = decide(sampler, incoming(trace_id=0x1, sampled=False, tracestate="ot=th:0,vendor=v"), 0x1)
    assert result.decision is Decision.DROP
    assert result.trace_state == TraceState([("vendor", "v")])


def test_unhashable_baggage_value_is_matched_without_caching(sampler: BaggageSampler) -> None:
    context = baggage.set_baggage("tenant_id", ["staging-eu"], Context())
    assert decide(sampler, context, (1 << 56) - 1).decision is Decision.DROP  # "['staging-eu']" != staging-*


def test_match_cache_stays_bounded(sampler: BaggageSampler) -> None:
    for index in range(10_000):
        decide(sampler, baggage.set_baggage("tenant_id", f"t{index}", Context()), 0x1)
    assert len(sampler._match_cache) <= 4096


def test_description() -> None:
    assert BaggageSampler.from_config(POLICIES).get_description() == "BaggageSampler{policies=3,default_ratio=0.0}"


def test_spans_from_a_tracer_provider_carry_policy_and_threshold() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        sampler=BaggageSampler.from_config(POLICIES), resource=Resource.create({"service.name": "gateway"})
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    for baggage_header, name in (("sample_policy=debug-high", "root"), ("sample_policy=off", "dropped")):
        # As server instrumentation does: attach the extracted context, then start spans in it.
        token = context.attach(incoming(baggage_header))
        try:
            with tracer.start_as_current_span(name), tracer.start_as_current_span(f"{name}-child"):
                pass
        finally:
            context.detach(token)
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert set(spans) == {"root", "root-child"}
    assert spans["root"].attributes["hotspan.sampling.policy"] == "debug"
    assert "hotspan.sampling.policy" not in spans["root-child"].attributes
    for span in spans.values():
        assert span.context.trace_state.get("ot") == "th:0"


def test_policy_starts_recording_under_an_unsampled_local_parent() -> None:
    """Baggage set after a service's entry span started (e.g. from request headers in the handler)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=BaggageSampler.from_config(POLICIES))  # default ratio 0
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("entry") as entry:
        assert not entry.get_span_context().trace_flags.sampled
        token = context.attach(baggage.set_baggage("sample_policy", "debug-high"))
        try:
            with tracer.start_as_current_span("handler"), tracer.start_as_current_span("llm"):
                pass
        finally:
            context.detach(token)
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert set(spans) == {"handler", "llm"}
    assert spans["handler"].attributes["hotspan.sampling.policy"] == "debug"


@pytest.mark.parametrize("baggage_header", [None, "sample_policy=debug-high", "tenant_id=staging-eu"])
def test_attributes_given_at_span_start_survive_sampling(baggage_header: str | None) -> None:
    """The SDK builds a span's attributes from the sampling result alone: they must be handed back."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=BaggageSampler.from_config({**POLICIES, "default_ratio": 1.0}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    token = context.attach(incoming(baggage_header, trace_id=(1 << 56) - 1, sampled=False))
    try:
        with (
            tracer.start_as_current_span("root", attributes={"http.route": "/chat"}),
            tracer.start_as_current_span("child", attributes={"gen_ai.system": "vllm"}),
        ):
            pass
    finally:
        context.detach(token)
    spans = {span.name: dict(span.attributes) for span in exporter.get_finished_spans()}
    if baggage_header is None:  # unsampled remote parent, no policy: dropped like ParentBased
        assert spans == {}
        return
    assert spans["root"]["http.route"] == "/chat"
    assert spans["child"]["gen_ai.system"] == "vllm"
    assert "hotspan.sampling.policy" in spans["root"]  # the decision was made here
    assert "hotspan.sampling.policy" not in spans["child"]  # inherited from its local parent


def test_attributes_survive_on_the_default_path() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=BaggageSampler())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with (
        tracer.start_as_current_span("root", attributes={"a": 1}),
        tracer.start_as_current_span("child", attributes={"b": 2}),
    ):
        pass
    assert {span.name: dict(span.attributes) for span in exporter.get_finished_spans()} == {
        "root": {"a": 1},
        "child": {"b": 2},
    }
