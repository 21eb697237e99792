"""Protobuf ``ExportTraceServiceRequest`` → one columnar batch in the ``otel_traces`` layout, in Python.

Each span is validated on its own (OTLP: a receiver rejects invalid spans individually and reports
them in ``partial_success``); the valid ones become one Arrow table, written in one INSERT. Spans
over a :class:`~collector.limits.SpanLimits` limit are cut down and marked, not rejected; of spans
sharing one ``(traceId, spanId)`` in a request only the last is kept, the others are reported.

This is the reference conversion: ``hotspan import``'s check and every request the compiled scanner
(:mod:`collector.native_writer`, which the served path and the synchronous :class:`~collector.ingest.Ingestor`
convert through) does not handle use it, and the scanner is tested against it row for row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.attributes import value_to_string
from collector.limits import TRUNCATED_KEY, SpanLimits, truncation_marker
from collector.rejections import Position, Rejection, SpanError, duplicate_warning, span_path
from collector.results import ExportResult, export_result
from storage.ids import SPAN_ID_BYTES, TRACE_ID_BYTES, IdError, check_id_bytes
from storage.schema import SPAN_KINDS, SPAN_SCHEMA, STATUS_CODES

UNKNOWN_SERVICE = "unknown_service"
"""``service.name`` for resources without one, as the OTel resource semantic conventions prescribe."""

MAX_TIME_NS = 2**63 - 1
"""Latest time a ``DateTime64(9)`` column holds (2262-04-11); later times are rejected, not wrapped."""

EARLIEST_PLAUSIBLE_NS = 946_684_800 * 10**9
"""2000-01-01T00:00:00Z in ns. OTLP times are ns since the Unix epoch; a span starting earlier was almost surely
sent in µs, ms or s (a common exporter mistake): it is stored as sent, and the answer warns
(:func:`early_start_warning`). The compiled scanner leaves such requests to this module (``_otlp_rows.c``)."""

DEFAULT_LIMITS = SpanLimits()


@dataclass
class SpanBatch:
    """The outcome of converting one request.

    Attributes:
        table: accepted spans, :data:`storage.schema.SPAN_SCHEMA`.
        rejections: one entry per span that was not accepted, in request order.
        warnings: request-level notes that did not cost a span (e.g. a resource without ``service.name``).
        truncated: accepted spans that a limit cut down.
    """

    table: pa.Table
    rejections: list[Rejection] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    truncated: int = 0

    @property
    def accepted(self) -> int:
        """Number of accepted spans."""
        return self.table.num_rows


@dataclass(frozen=True)
class _Resource:
    """A resource's stored columns and what its limits cut, shared by all of its spans."""

    service: str
    items: list[tuple[str, str]]
    dropped: int
    shortened: int


@dataclass(frozen=True)
class Verdict:
    """Which spans of a request are stored, and why the others are not.

    Attributes:
        kept: positions of the spans to store.
        rejections: one per span refused, in request order (a decoder's own first). A span's earlier copies in
            its request are neither kept nor refused: a warning says they are stored once, as the last copy.
        warnings: request-level notes that cost no span.
    """

    kept: frozenset[Position]
    rejections: list[Rejection]
    warnings: list[str]

    def result(self) -> ExportResult:
        """The OTLP answer for the request."""
        return export_result(len(self.kept), self.rejections, self.warnings)


def check_request(
    request: ExportTraceServiceRequest,
    rejections: Sequence[Rejection] | None = None,
    limits: SpanLimits = DEFAULT_LIMITS,
) -> Verdict:
    """Apply :func:`check_span` to every span, resolve duplicates and find what ``limits`` cut, converting only
    what a limit may cut.

    Of valid spans sharing ``(traceId, spanId, kind, name, startTimeUnixNano)`` (a 64-bit trace ID
    counts as its padded form) the last one in the request is kept and the others are dropped with a
    warning, not rejected: a span sent twice (a retry, or a later and more complete write of it) is
    stored once, as when the copies come in two requests. Kind, name and start are part of the identity
    because real data reuses span IDs for different spans: Zipkin's shared RPC spans give the client and
    the server side one ID, Zipkin messaging data gives one ID to several receives, and Jaeger test data
    renames spans.

    A kept span that ``limits`` cut (:func:`to_batch` stores it cut and marked) costs no span but a warning
    (:func:`truncated_warning`): the sender learns of the loss, as OTLP's partial success allows.

    Args:
        request: the decoded request.
        rejections: spans a decoder already refused; those with a ``position`` are placeholders.
        limits: the span limits :func:`to_batch` applies.
    """
    given = list(rejections or [])
    skip = {r.position for r in given if r.position is not None}
    found: list[Rejection] = []
    unnamed: list[int] = []
    early: list[tuple[Position, int]] = []
    unended: list[Position] = []
    cut: list[Position] = []
    copies: dict[tuple[bytes, bytes, int, str, int], list[Position]] = {}
    for r_index, resource_spans in enumerate(request.resource_spans):
        if not _service_name(resource_spans.resource):
            unnamed.append(r_index)
        resource_cut: bool | None = None
        for s_index, scope_spans in enumerate(resource_spans.scope_spans):
            for p_index, span in enumerate(scope_spans.spans):
                position = (r_index, s_index, p_index)
                if position in skip:
                    continue
                try:
                    check_span(span)
                except SpanError as exc:
                    found.append(Rejection.at(position, str(exc)))
                    continue
                if span.start_time_unix_nano < EARLIEST_PLAUSIBLE_NS:
                    early.append((position, span.start_time_unix_nano))
                if not span.end_time_unix_nano:
                    unended.append(position)
                if resource_cut is None:
                    resource = _resource(resource_spans.resource, limits)
                    resource_cut = bool(resource.dropped or resource.shortened)
                if resource_cut or _over_limits(span, limits):
                    cut.append(position)
                trace_id = span.trace_id if len(span.trace_id) == TRACE_ID_BYTES else bytes(8) + span.trace_id
                key = (trace_id, span.span_id, span.kind, span.name, span.start_time_unix_nano)
                copies.setdefault(key, []).append(position)
    kept = {group[-1] for group in copies.values()}
    repeated = sorted((group[0], group[-1]) for group in copies.values() if len(group) > 1)
    rejected = sorted(given + found, key=lambda r: r.position or (-1, -1, -1))
    warnings = [unnamed_service_warning(unnamed)] if unnamed else []
    if repeated:
        dropped = sum(len(group) - 1 for group in copies.values())
        warnings.append(duplicate_warning(dropped, *repeated[0]))
    early = [(position, start) for position, start in early if position in kept]
    if early:
        warnings.append(early_start_warning(len(early), *early[0]))
    unended = [position for position in unended if position in kept]
    if unended:
        warnings.append(unended_warning(len(unended), unended[0]))
    cut = [position for position in cut if position in kept]
    if cut:
        r_index, s_index, p_index = cut[0]
        resource_spans = request.resource_spans[r_index]
        span = resource_spans.scope_spans[s_index].spans[p_index]
        marker = _row(span, _resource(resource_spans.resource, limits), limits)["SpanAttributes"][-1][1]
        warnings.append(truncated_warning(len(cut), cut[0], str(marker)))
    return Verdict(frozenset(kept), rejected, warnings)


STORED_GROWTH = 6
"""Most characters an attribute value's stored text holds per byte of its span's protobuf encoding: a byte of a
string inside an array or key-value list is JSON-escaped to at most 6 (``\\u00XX``); every other form is
shorter than its bytes times 6 (a double's 9 bytes give at most 24 characters, an int's at least 2 give 20)."""


def _over_limits(span: Span, limits: SpanLimits) -> bool:
    """Whether :func:`_row` cuts anything of ``span`` (its resource aside). Counts first; values are stringified
    only when the span's encoding is long enough that one may pass ``limits.max_value_chars``
    (:data:`STORED_GROWTH`), so a span of usual size costs a few length reads."""
    if len(span.events) > limits.max_events or len(span.links) > limits.max_links:
        return True
    lists = [span.attributes, *(event.attributes for event in span.events), *(link.attributes for link in span.links)]
    if any(len(attributes) > limits.max_attributes for attributes in lists):
        return True
    if span.ByteSize() * STORED_GROWTH <= limits.max_value_chars:
        return False
    return any(len(value_to_string(kv.value)) > limits.max_value_chars for attributes in lists for kv in attributes)


def to_batch(
    request: ExportTraceServiceRequest,
    rejections: Sequence[Rejection] | None = None,
    limits: SpanLimits = DEFAULT_LIMITS,
) -> SpanBatch:
    """Validate (:func:`check_request`) and flatten every kept span of ``request`` into columns.

    Args:
        request: the decoded request.
        rejections: spans a decoder already refused (OTLP/JSON); those with a ``position`` are
            placeholders in ``request`` and are skipped here.
        limits: per-span limits; the excess is cut and marked with :data:`~collector.limits.TRUNCATED_KEY`.

    Returns:
        A :class:`SpanBatch`; never raises for a bad span.
    """
    verdict = check_request(request, rejections, limits)
    columns: dict[str, list] = {name: [] for name in SPAN_SCHEMA.names}
    truncated = 0
    for r_index, resource_spans in enumerate(request.resource_spans):
        resource = None
        for s_index, scope_spans in enumerate(resource_spans.scope_spans):
            scope = scope_spans.scope
            for p_index, span in enumerate(scope_spans.spans):
                if (r_index, s_index, p_index) not in verdict.kept:
                    continue
                resource = resource or _resource(resource_spans.resource, limits)
                row = _row(span, resource, limits)
                row["ServiceName"] = resource.service or UNKNOWN_SERVICE
                row["ResourceAttributes"] = resource.items
                row["ScopeName"] = scope.name
                row["ScopeVersion"] = scope.version
                for name, value in row.items():
                    columns[name].append(value)
                attributes = row["SpanAttributes"]
                truncated += bool(attributes) and attributes[-1][0] == TRUNCATED_KEY  # type: ignore[index]
    return SpanBatch(pa.table(columns, schema=SPAN_SCHEMA), verdict.rejections, verdict.warnings, truncated)


def stored_names(
    request: ExportTraceServiceRequest, kept: frozenset[Position], limits: SpanLimits = DEFAULT_LIMITS
) -> tuple[set[str], set[str]]:
    """``(trace IDs, service names)`` of the spans at ``kept`` (a :class:`Verdict`'s) as :func:`to_batch` stores
    them (lowercase hex, a 64-bit trace ID left-padded; ``service.name`` cut to ``limits`` or
    :data:`UNKNOWN_SERVICE`), without converting the spans: what an import's summary counts."""
    traces: set[str] = set()
    services: set[str] = set()
    for r_index, resource_spans in enumerate(request.resource_spans):
        stored = False
        for s_index, scope_spans in enumerate(resource_spans.scope_spans):
            for p_index, span in enumerate(scope_spans.spans):
                if (r_index, s_index, p_index) in kept:
                    traces.add(_hex_id(span.trace_id, TRACE_ID_BYTES))
                    stored = True
        if stored:
            services.add(_resource(resource_spans.resource, limits).service or UNKNOWN_SERVICE)
    return traces, services


def _service_name(resource: Resource) -> str:
    """The stored ``service.name`` of a resource before the length limit (last one given), or ''."""
    for kv in reversed(resource.attributes):
        if kv.key == "service.name":
            return value_to_string(kv.value)
    return ""


WARNED_RESOURCES = 5
"""Resources a warning names at most: one request may hold millions, and the answer stays small."""


def unnamed_service_warning(r_indexes: Sequence[int]) -> str:
    """The one warning for the resources at ``r_indexes`` (at least one) that have no ``service.name``: each named
    up to :data:`WARNED_RESOURCES`, then how many more."""
    named = ", ".join(f"resourceSpans[{i}].resource" for i in r_indexes[:WARNED_RESOURCES])
    more = len(r_indexes) - WARNED_RESOURCES
    verb = "has" if len(r_indexes) == 1 else "have"
    return f"{named}{f' and {more} more' if more > 0 else ''} {verb} no 'service.name'; stored as '{UNKNOWN_SERVICE}'"


def unended_warning(count: int, first: Position) -> str:
    """The one warning for ``count`` (≥ 1) kept spans without an end (``endTimeUnixNano`` 0 or absent), naming the
    first at ``first``. OTLP calls the field required, but an exporter flushing a span that never ended (a crashed or
    still running operation) sends it unset; losing the span would lose its name, attributes and its children's
    parent, so it is stored with duration 0, as a span sent when it started, and the analysis reads it so
    (:mod:`analysis.request_window`). A later copy with an end replaces it (same identity, later version)."""
    spans = "1 span has" if count == 1 else f"{count} spans have"
    return (
        f"{spans} no endTimeUnixNano (0: the span had not ended when sent), first {span_path(first)}; "
        "stored with duration 0, as sent when it started"
    )


def truncated_warning(count: int, first: Position, marker: str) -> str:
    """The one warning for ``count`` (≥ 1) kept spans that span limits cut, naming the first at ``first`` and what
    was cut of it (``marker``, the :data:`~collector.limits.TRUNCATED_KEY` value it is stored with)."""
    spans = "1 span was" if count == 1 else f"{count} spans were"
    return (
        f"{spans} over the span limits, first {span_path(first)} (cut: {marker}); stored cut, marked "
        f"'{TRUNCATED_KEY}' (HOTSPAN_MAX_ATTRIBUTES, HOTSPAN_MAX_EVENTS, HOTSPAN_MAX_LINKS, "
        "HOTSPAN_MAX_ATTRIBUTE_VALUE_CHARS)"
    )


_UNIT_GUESSES = ((10**3, "microseconds"), (10**6, "milliseconds"), (10**9, "seconds"))


def early_start_warning(count: int, first: Position, start_ns: int) -> str:
    """The one warning for ``count`` (≥ 1) valid spans starting before :data:`EARLIEST_PLAUSIBLE_NS`, naming the first
    at ``first`` with its ``startTimeUnixNano`` (``start_ns``, > 0), and the unit whose reading of it falls between
    2000 and 2262, if one does."""
    day = datetime.fromtimestamp(start_ns // 10**9, UTC).date()
    guess = next(
        (
            f", which read as {unit} is {datetime.fromtimestamp(start_ns * scale // 10**9, UTC).date()}"
            for scale, unit in _UNIT_GUESSES
            if EARLIEST_PLAUSIBLE_NS <= start_ns * scale <= MAX_TIME_NS
        ),
        "",
    )
    spans = "1 span starts" if count == 1 else f"{count} spans start"
    return (
        f"{spans} before 2000-01-01: {span_path(first)} at startTimeUnixNano {start_ns} ({day}){guess}; "
        "OTLP times are nanoseconds since the Unix epoch; stored as sent (and, with a retention period, "
        "deleted as expired)"
    )


def check_span(span: Span) -> None:
    """Apply the per-span validity rules, in order; the first broken one raises.

    Rules: trace, span and parent IDs of the right length and not all zeros (a 64-bit trace ID is
    padded); a start time, no end before the start but 0 (unset: a span exported before it ended, stored with
    duration 0 as one sent when it started, :func:`unended_warning`), no start or end past :data:`MAX_TIME_NS`;
    kind and
    status code within their enums; event times not past :data:`MAX_TIME_NS`; link IDs as span IDs.

    Raises:
        SpanError: naming the field, the value and the rule.
    """
    _checked_id(span.trace_id, TRACE_ID_BYTES, "traceId")
    _checked_id(span.span_id, SPAN_ID_BYTES, "spanId")
    if span.parent_span_id:
        _checked_id(span.parent_span_id, SPAN_ID_BYTES, "parentSpanId")
    start, end = span.start_time_unix_nano, span.end_time_unix_nano
    if start == 0:
        raise SpanError("startTimeUnixNano is missing or 0")
    if 0 < end < start:
        raise SpanError(f"endTimeUnixNano {end} is before startTimeUnixNano {start}")
    for field_name, value in (("endTimeUnixNano", end), ("startTimeUnixNano", start)):
        if value > MAX_TIME_NS:
            raise SpanError(f"{field_name} {value} is beyond the year 2262 (the store's DateTime64(9) range)")
    if not 0 <= span.kind < len(SPAN_KINDS):
        raise SpanError(f"kind {span.kind} is not a SpanKind value (0-5)")
    if not 0 <= span.status.code < len(STATUS_CODES):
        raise SpanError(f"status.code {span.status.code} is not a StatusCode value (0-2)")
    for index, event in enumerate(span.events):
        if event.time_unix_nano > MAX_TIME_NS:
            raise SpanError(f"events[{index}].timeUnixNano {event.time_unix_nano} is beyond the year 2262")
    for index, link in enumerate(span.links):
        _checked_id(link.trace_id, TRACE_ID_BYTES, f"links[{index}].traceId")
        _checked_id(link.span_id, SPAN_ID_BYTES, f"links[{index}].spanId")


def _row(span: Span, resource: _Resource, limits: SpanLimits) -> dict[str, object]:
    """The columns of a span that passed :func:`check_span`, but service, resource and scope."""
    attributes, dropped, shortened = _attributes(span.attributes, limits)
    events = span.events[: limits.max_events]
    links = span.links[: limits.max_links]
    event_attributes, event_dropped = [], 0
    for event in events:
        items, e_dropped, e_shortened = _attributes(event.attributes, limits)
        event_attributes.append(items)
        event_dropped += e_dropped
        shortened += e_shortened
    link_attributes, link_dropped = [], 0
    for link in links:
        items, l_dropped, l_shortened = _attributes(link.attributes, limits)
        link_attributes.append(items)
        link_dropped += l_dropped
        shortened += l_shortened
    marker = truncation_marker(
        attributes=dropped,
        events=len(span.events) - len(events),
        links=len(span.links) - len(links),
        event_attributes=event_dropped,
        link_attributes=link_dropped,
        resource_attributes=resource.dropped,
        values=shortened + resource.shortened,
    )
    if marker:
        attributes.append((TRUNCATED_KEY, marker))
    start = span.start_time_unix_nano
    return {
        "Timestamp": start,
        "TraceId": _hex_id(span.trace_id, TRACE_ID_BYTES),
        "SpanId": span.span_id.hex(),
        "ParentSpanId": span.parent_span_id.hex(),
        "TraceState": span.trace_state,
        "SpanName": span.name,
        "SpanKind": SPAN_KINDS[span.kind],
        "SpanAttributes": attributes,
        "Duration": span.end_time_unix_nano - start if span.end_time_unix_nano else 0,
        "StatusCode": STATUS_CODES[span.status.code],
        "StatusMessage": span.status.message,
        "Events.Timestamp": [event.time_unix_nano for event in events],
        "Events.Name": [event.name for event in events],
        "Events.Attributes": event_attributes,
        "Links.TraceId": [_hex_id(link.trace_id, TRACE_ID_BYTES) for link in links],
        "Links.SpanId": [link.span_id.hex() for link in links],
        "Links.TraceState": [link.trace_state for link in links],
        "Links.Attributes": link_attributes,
    }


def _resource(resource: Resource, limits: SpanLimits) -> _Resource:
    """Resource attributes as the exporter keeps them: one value per key (the last one given)."""
    values = {kv.key: value_to_string(kv.value) for kv in resource.attributes}
    service = _cut(values.get("service.name", ""), limits.max_value_chars)
    items = list(values.items())[: limits.max_attributes]
    kept = [(key, _cut(value, limits.max_value_chars)) for key, value in items]
    shortened = sum(1 for (_, value), (_, cut) in zip(items, kept, strict=True) if len(cut) < len(value))
    return _Resource(service, kept, len(values) - len(items), shortened)


def _attributes(attributes: Iterable[KeyValue], limits: SpanLimits) -> tuple[list[tuple[str, str]], int, int]:
    """``(kept (key, value) pairs, attributes dropped, values shortened)`` of one attribute list."""
    listed = list(attributes)
    items = []
    shortened = 0
    for kv in listed[: limits.max_attributes]:
        value = value_to_string(kv.value)
        if len(value) > limits.max_value_chars:
            value = value[: limits.max_value_chars]
            shortened += 1
        items.append((kv.key, value))
    return items, max(0, len(listed) - limits.max_attributes), shortened


def _cut(value: str, max_chars: int) -> str:
    return value[:max_chars]


def _hex_id(raw: bytes, size: int) -> str:
    """Lowercase hex of an ID that passed :func:`check_span` (a 64-bit trace ID left-padded)."""
    return raw.hex().rjust(size * 2, "0")


def _checked_id(raw: bytes, size: int, field_name: str) -> None:
    try:
        check_id_bytes(raw, size)
    except IdError as exc:
        raise SpanError(f"{field_name} {exc}") from exc
