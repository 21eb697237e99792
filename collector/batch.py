"""Protobuf ``ExportTraceServiceRequest`` → one columnar batch in the ``otel_traces`` layout.

Each span is validated on its own (OTLP: a receiver rejects invalid spans individually and reports
them in ``partial_success``); the valid ones become one Arrow table, written in one INSERT.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.attributes import value_to_string
from collector.ids import SPAN_ID_BYTES, TRACE_ID_BYTES, IdError, check_id_bytes
from collector.rejections import Rejection, SpanError
from storage.schema import SPAN_KINDS, SPAN_SCHEMA, STATUS_CODES

UNKNOWN_SERVICE = "unknown_service"
"""``service.name`` for resources without one, as the OTel resource semantic conventions prescribe."""


@dataclass
class SpanBatch:
    """The outcome of converting one request.

    Attributes:
        table: accepted spans, :data:`storage.schema.SPAN_SCHEMA`.
        rejections: one entry per span that was not accepted.
        warnings: request-level notes that did not cost a span (e.g. a resource without ``service.name``).
    """

    table: pa.Table
    rejections: list[Rejection] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> int:
        """Number of accepted spans."""
        return self.table.num_rows


def to_batch(request: ExportTraceServiceRequest, rejections: list[Rejection] | None = None) -> SpanBatch:
    """Validate and flatten every span of ``request`` into columns.

    Args:
        request: the decoded request.
        rejections: spans a decoder already skipped (OTLP/JSON), carried into the result.

    Returns:
        A :class:`SpanBatch`; never raises for a bad span.
    """
    columns: dict[str, list] = {name: [] for name in SPAN_SCHEMA.names}
    rejected = list(rejections or [])
    warnings: list[str] = []
    for r_index, resource_spans in enumerate(request.resource_spans):
        resource = {kv.key: value_to_string(kv.value) for kv in resource_spans.resource.attributes}
        service = resource.get("service.name", "")
        if not service:
            service = UNKNOWN_SERVICE
            warnings.append(f"resourceSpans[{r_index}].resource has no 'service.name'; stored as '{UNKNOWN_SERVICE}'")
        resource_items = list(resource.items())
        for s_index, scope_spans in enumerate(resource_spans.scope_spans):
            scope = scope_spans.scope
            for p_index, span in enumerate(scope_spans.spans):
                try:
                    row = _row(span)
                except SpanError as exc:
                    path = f"resourceSpans[{r_index}].scopeSpans[{s_index}].spans[{p_index}]"
                    rejected.append(Rejection(path, str(exc)))
                    continue
                for name, value in row.items():
                    columns[name].append(value)
                columns["ServiceName"].append(service)
                columns["ResourceAttributes"].append(resource_items)
                columns["ScopeName"].append(scope.name)
                columns["ScopeVersion"].append(scope.version)
    return SpanBatch(pa.table(columns, schema=SPAN_SCHEMA), rejected, warnings)


def _row(span: Span) -> dict[str, object]:
    """The span's own columns (all but service, resource and scope). Raises SpanError."""
    trace_id = _checked_id(span.trace_id, TRACE_ID_BYTES, "traceId")
    span_id = _checked_id(span.span_id, SPAN_ID_BYTES, "spanId")
    parent_id = _checked_id(span.parent_span_id, SPAN_ID_BYTES, "parentSpanId") if span.parent_span_id else ""
    start, end = span.start_time_unix_nano, span.end_time_unix_nano
    if start == 0:
        raise SpanError("startTimeUnixNano is missing or 0")
    if end < start:
        raise SpanError(f"endTimeUnixNano {end} is before startTimeUnixNano {start}")
    if start >= 2**63:
        raise SpanError(f"startTimeUnixNano {start} is beyond the year 2262")
    if span.kind >= len(SPAN_KINDS):
        raise SpanError(f"kind {span.kind} is not a SpanKind value (0-5)")
    if span.status.code >= len(STATUS_CODES):
        raise SpanError(f"status.code {span.status.code} is not a StatusCode value (0-2)")
    return {
        "Timestamp": start,
        "TraceId": trace_id,
        "SpanId": span_id,
        "ParentSpanId": parent_id,
        "TraceState": span.trace_state,
        "SpanName": span.name,
        "SpanKind": SPAN_KINDS[span.kind],
        "SpanAttributes": [(kv.key, value_to_string(kv.value)) for kv in span.attributes],
        "Duration": end - start,
        "StatusCode": STATUS_CODES[span.status.code],
        "StatusMessage": span.status.message,
        "Events.Timestamp": [event.time_unix_nano for event in span.events],
        "Events.Name": [event.name for event in span.events],
        "Events.Attributes": [
            [(kv.key, value_to_string(kv.value)) for kv in event.attributes] for event in span.events
        ],
        "Links.TraceId": [_checked_id(link.trace_id, TRACE_ID_BYTES, "links.traceId") for link in span.links],
        "Links.SpanId": [_checked_id(link.span_id, SPAN_ID_BYTES, "links.spanId") for link in span.links],
        "Links.TraceState": [link.trace_state for link in span.links],
        "Links.Attributes": [[(kv.key, value_to_string(kv.value)) for kv in link.attributes] for link in span.links],
    }


def _checked_id(raw: bytes, size: int, field_name: str) -> str:
    try:
        return check_id_bytes(raw, size).hex()
    except IdError as exc:
        raise SpanError(f"{field_name} {exc}") from exc
