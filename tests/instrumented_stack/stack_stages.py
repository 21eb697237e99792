"""Per-stage measurements over a scenario's spans, shared by the fault tests."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from opentelemetry.sdk.trace import ReadableSpan
from prometheus_client.parser import text_string_to_metric_families

from instrumented_stack.capture import InMemorySpans


def seconds(span: ReadableSpan) -> float:
    """A span's duration in seconds."""
    return (span.end_time - span.start_time) / 1e9


def named(spans: InMemorySpans, prefix: str) -> list[ReadableSpan]:
    """Every span whose name starts with ``prefix``."""
    return [span for span in spans.spans() if span.name.startswith(prefix)]


def engine_sum(spans: InMemorySpans, attribute: str) -> float:
    """Sum of an ``llm_request`` latency attribute (``gen_ai.latency.<attribute>``), seconds."""
    return sum(span.attributes[f"gen_ai.latency.{attribute}"] for span in named(spans, "llm_request"))


def median_s(spans: Iterable[ReadableSpan]) -> float:
    """Median duration in seconds."""
    return statistics.median(seconds(span) for span in spans)


def service(span: ReadableSpan) -> str:
    return str(span.resource.attributes["service.name"])


def metric_value(exposition: str, sample_name: str) -> float:
    """A sample's value summed over its label sets (0 when absent), from a Prometheus text exposition."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == sample_name
    )
