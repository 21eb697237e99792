"""BaggageSpanProcessor: allow-listed baggage entries become span attributes at start."""

import pytest
from opentelemetry import baggage, context
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hotspan_sdk import BaggageSpanProcessor, ConfigError


def export_one(processor: BaggageSpanProcessor, parent: Context | None) -> dict[str, object]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("test").start_as_current_span("op", context=parent):
        pass
    (span,) = exporter.get_finished_spans()
    return dict(span.attributes)


def extracted(header: str) -> Context:
    return W3CBaggagePropagator().extract({"baggage": header}, context=Context())


def test_copies_only_allow_listed_keys() -> None:
    parent = extracted("tenant_id=acme,sample_policy=debug-high,secret=hunter2")
    assert export_one(BaggageSpanProcessor(["tenant_id", "sample_policy", "absent"]), parent) == {
        "tenant_id": "acme",
        "sample_policy": "debug-high",
    }


def test_percent_encoding_and_properties() -> None:
    parent = extracted("tenant_id=staging%2Deu%20west;ttl=60;p")
    assert export_one(BaggageSpanProcessor(["tenant_id"]), parent) == {"tenant_id": "staging-eu west"}


def test_attribute_prefix() -> None:
    parent = extracted("tenant_id=acme")
    assert export_one(BaggageSpanProcessor(["tenant_id"], attribute_prefix="baggage."), parent) == {
        "baggage.tenant_id": "acme"
    }


def test_reads_the_current_context_when_no_parent_is_given() -> None:
    token = context.attach(baggage.set_baggage("tenant_id", "acme"))
    try:
        assert export_one(BaggageSpanProcessor(["tenant_id"]), None) == {"tenant_id": "acme"}
    finally:
        context.detach(token)


def test_no_baggage_sets_nothing() -> None:
    assert export_one(BaggageSpanProcessor(["tenant_id"]), Context()) == {}


def test_non_string_values_are_stringified() -> None:
    parent = baggage.set_baggage("attempt", 3, Context())
    assert export_one(BaggageSpanProcessor(["attempt"]), parent) == {"attempt": "3"}


def test_invalid_configuration() -> None:
    with pytest.raises(ConfigError) as caught:
        BaggageSpanProcessor(["tenant_id", "", 7])  # type: ignore[list-item]
    assert [issue.key for issue in caught.value.issues] == ["keys[1]", "keys[2]"]
    with pytest.raises(ConfigError, match="at least one"):
        BaggageSpanProcessor([])
