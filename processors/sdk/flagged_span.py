"""A read-only copy of an ended span with extra attributes, for processors that must annotate in on_end.

Why a copy: the OTel Python SDK (checked on 1.45) freezes a span before any processor hook that could
still annotate it. ``Span.end()`` sets the end time and marks the attributes immutable, then calls
``SpanProcessor._on_ending`` (where ``set_attribute`` only logs "Setting attribute on ended span") and
then ``on_end`` with a ``ReadableSpan`` sharing the same frozen attributes (mutating raises
``TypeError``). See open-telemetry/opentelemetry-python#5614. A processor that wraps the exporting
processor can instead hand it a new ``ReadableSpan`` carrying the extra attributes.
"""

from collections.abc import Mapping

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.util.types import AttributeValue


class _AnnotatedSpan(ReadableSpan):
    """``ReadableSpan`` whose dropped-item counts come from the span it copies.

    ``ReadableSpan`` derives those counts from its bounded containers, which a copy built from public
    accessors does not have; exporters send the counts, so they must survive the copy.
    """

    def __init__(self, span: ReadableSpan, attributes: Mapping[str, AttributeValue]) -> None:
        super().__init__(
            name=span.name,
            context=span.context,
            parent=span.parent,
            resource=span.resource,
            attributes=attributes,
            events=span.events,
            links=span.links,
            kind=span.kind,
            status=span.status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=span.instrumentation_scope,
        )
        self._dropped_counts = (span.dropped_attributes, span.dropped_events, span.dropped_links)

    @property
    def dropped_attributes(self) -> int:
        return self._dropped_counts[0]

    @property
    def dropped_events(self) -> int:
        return self._dropped_counts[1]

    @property
    def dropped_links(self) -> int:
        return self._dropped_counts[2]


def with_attributes(span: ReadableSpan, extra: Mapping[str, AttributeValue]) -> ReadableSpan:
    """Copy of ``span`` whose attributes are the span's plus ``extra`` (``extra`` wins on a clash).

    Everything an exporter reads is kept: identity, parent, kind, timing (ns), status, events, links,
    resource, instrumentation scope and dropped counts. The extra attributes are added beyond the
    span's attribute limit rather than dropped: they are few and the point of the copy.
    Thread-safe: reads ``span`` only. Cost: one dict and one object per call.
    """
    return _AnnotatedSpan(span, {**span.attributes, **extra})
