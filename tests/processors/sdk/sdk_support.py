"""Helpers shared by the hotspan_sdk tests (real SDK objects only)."""

from collections.abc import Mapping
from dataclasses import dataclass

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Tracer

BASE_NS = 1_700_000_000_000_000_000


@dataclass
class Metrics:
    """A MeterProvider to hand to a component and the reader that sees what it recorded."""

    provider: MeterProvider
    reader: InMemoryMetricReader


def end_span_after(tracer: Tracer, name: str, duration_ms: float, start_ns: int = BASE_NS) -> None:
    """Start and end a span whose duration is exactly ``duration_ms`` (explicit timestamps)."""
    span = tracer.start_span(name, start_time=start_ns)
    span.end(end_time=start_ns + round(duration_ms * 1_000_000))


def flagged(spans: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> list[ReadableSpan]:
    """The spans that carry ``hotspan.hotspot=true``."""
    return [span for span in spans if span.attributes.get("hotspan.hotspot") is True]


def counter_values(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, object], ...], int]:
    """Current value of a monotonic counter per attribute set (sorted attribute tuples)."""
    values: dict[tuple[tuple[str, object], ...], int] = {}
    data = reader.get_metrics_data()
    if data is None:
        return values
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    attributes: Mapping[str, object] = point.attributes or {}
                    values[tuple(sorted(attributes.items()))] = int(point.value)
    return values
