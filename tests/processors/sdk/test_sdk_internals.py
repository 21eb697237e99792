"""The OpenTelemetry SDK internals the processors read on their per-span paths, for speed.

HotspotSpanProcessor reads ``ReadableSpan``'s ``_start_time``, ``_end_time``, ``_resource`` and ``_name``
instead of the properties, and BaggageSpanProcessor writes into ``Span._attributes`` (the span's
``BoundedAttributes``) instead of calling ``set_attribute``. If an SDK release renames or reshapes them,
these tests fail before any processor misbehaves.
"""

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider


def test_readable_span_fields_match_their_properties() -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "internals"}))
    span = provider.get_tracer("test").start_span("op")
    span.end()
    copy = ReadableSpan(name="copy", resource=span.resource, start_time=1, end_time=2)
    for readable in (span, copy):
        assert readable._start_time == readable.start_time
        assert readable._end_time == readable.end_time
        assert readable._resource is readable.resource
        assert readable._name == readable.name


def test_started_span_attributes_are_bounded_and_apply_the_limits() -> None:
    limits = SpanLimits(max_span_attributes=2, max_span_attribute_length=3)
    span = TracerProvider(span_limits=limits).get_tracer("test").start_span("op", attributes={"a": "1"})
    assert isinstance(span._attributes, BoundedAttributes)
    span._attributes["tenant_id"] = "acme-corp"
    span._attributes["third"] = "x"
    span.end()
    via_set_attribute = TracerProvider(span_limits=limits).get_tracer("test").start_span("op", attributes={"a": "1"})
    via_set_attribute.set_attribute("tenant_id", "acme-corp")
    via_set_attribute.set_attribute("third", "x")
    via_set_attribute.end()
    # Values cut to the length limit, the oldest attribute dropped beyond the count: as set_attribute does.
    assert dict(span.attributes) == dict(via_set_attribute.attributes) == {"tenant_id": "acm", "third": "x"}
    assert span.dropped_attributes == via_set_attribute.dropped_attributes == 1
