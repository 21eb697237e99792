"""Keep the stack's spans in memory, per service, instead of exporting them.

For tests and notebooks that want the ground-truth traces without a collector::

    spans = InMemorySpans()
    run_stack(None, requests=5, span_processors=spans)
    for trace_id, trace in spans.traces().items(): ...
"""

from __future__ import annotations

from collections import defaultdict

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_trace_id


class InMemorySpans:
    """A span processor factory (``SpanProcessorFactory``) that keeps every service's finished spans.

    Each call makes a ``SimpleSpanProcessor`` over a new ``InMemorySpanExporter`` for that service, so a
    span is stored when it ends. Thread-safe; spans stay readable after the processors shut down.
    """

    def __init__(self) -> None:
        self.exporters: dict[str, InMemorySpanExporter] = {}
        """Exporter per ``service.name``, in the order the services were built."""

    def __call__(self, service_name: str) -> SpanProcessor:
        exporter = InMemorySpanExporter()
        self.exporters[service_name] = exporter
        return SimpleSpanProcessor(exporter)

    def spans(self, service_name: str | None = None) -> list[ReadableSpan]:
        """Finished spans of one service, or of every service when ``service_name`` is ``None``.

        Raises:
            KeyError: no service of that name was built.
        """
        names = [service_name] if service_name is not None else list(self.exporters)
        return [span for name in names for span in self.exporters[name].get_finished_spans()]

    def traces(self) -> dict[str, list[ReadableSpan]]:
        """Every finished span grouped by trace id (32 lowercase hex characters)."""
        grouped: dict[str, list[ReadableSpan]] = defaultdict(list)
        for span in self.spans():
            grouped[format_trace_id(span.context.trace_id)].append(span)
        return dict(grouped)
