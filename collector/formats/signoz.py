"""SigNoz's trace-detail answers, converted to OTLP-JSON spans.

Shapes read, as SigNoz's query service writes them (repository SigNoz/signoz):

- **v2 waterfall**, `POST /api/v2/traces/waterfall/{traceId}` (`GetWaterfallSpansForTraceWithMetadataResponse`,
  its spans `model.Span`, in `pkg/query-service/model/response.go`; filled by `GetWaterfallSpansForTraceWithMetadata`
  in `pkg/query-service/app/clickhouseReader/reader.go`): `{"startTimestampMillis", ..., "spans": [span, ...]}`, a
  span holding `timestamp` (start, **milliseconds**), `durationNano` (**nanoseconds**), `spanId`, `traceId`,
  `serviceName`, `name`, `kind` (the OTLP `SpanKind` number), `spanKind` (its name: `Server`), `references`
  (`[{"traceId", "spanId", "refType": "CHILD_OF"|"FOLLOWS_FROM"}]`, the parent as CHILD_OF), `tagMap` (span and
  resource attributes merged into one string → string map, numbers and bools printed as text), `event` (each event
  `{"name", "timeUnixNano", "attributeMap", "isError"}`, as an object or, in older versions, as that JSON in a
  string), `hasError`, `statusCodeString` (`Unset`/`Ok`/`Error`), `statusMessage`; the UI's type
  (`frontend/src/types/api/trace/getTraceV2.ts`) also names a `parentSpanId`, read when present.
- **v3 waterfall** (`GettableWaterfallTrace` and `WaterfallSpan` in `pkg/types/spantypes/waterfall_trace.go` and
  `waterfall_span.go`): the same envelope, spans with snake_case keys: `span_id`, `trace_id`, `parent_span_id`,
  `time_unix` (start, **milliseconds**; the UI's `getTraceV3.ts` calls it `timestamp`, also read), `duration_nano`,
  `name`, `kind_string`, `attributes` (typed values), `resource` (string → string, `service.name` among them),
  `events`, `has_error`, `status_code` (the OTLP status number), `status_code_string`, `status_message`,
  `trace_state`. The derived columns (`http_url`, `db_name` ...) copy attributes and are not read.
- **v1**, `GET /api/v1/traces/{traceId}` (`SearchTracesV2` in `reader.go`, rows from `SearchSpanResponseItem.GetValues`
  in `response.go`): `[{"columns": ["__time", "SpanId", "TraceId", "ServiceName", "Name", "Kind", "DurationNano",
  "TagsKeys", "TagsValues", "References", "Events", "HasError", "StatusMessage", "StatusCodeString", "SpanKind"],
  "events": [row, ...]}]`, `__time` in **milliseconds**, `Kind` and `DurationNano` as decimal text, references
  printed as `{TraceId=<hex>, SpanId=<hex>, RefType=CHILD_OF}`, events as JSON strings. Older answers stop after
  `HasError`; the row is read by the names in `columns`.

Units: SigNoz divides the start time to milliseconds for its UI (`span.TimeUnixNano / 1000000`), so a converted
span starts at that millisecond (the sub-millisecond part is lost) and ends `durationNano` later, exact; event times
are nanoseconds. IDs are SigNoz's lowercase hex (32 and 16 digits).

Mapping: service `serviceName` (v3: `resource["service.name"]`), else `unknown_service`; the v2 and v1 `tagMap` holds
the resource attributes too, and cannot tell them apart, so all of it becomes span attributes (`service.name` left
to the resource), as text; the v3 `attributes` keep their types and `resource` becomes the resource. Kind from the
number, else the name. Status from the status number, else `statusCodeString`, else `hasError` (ERROR), with the
status message. Parent: `parentSpanId`, else the first CHILD_OF reference; every other reference is a link (SigNoz's
collector writes a span's links as FOLLOWS_FROM references).

A waterfall answer holds only the spans SigNoz sent (all of them up to its page limit, else a window around the
selected span; `totalSpansCount` says how many the trace has). The placeholders SigNoz adds for a parent it never
received (`name` "Missing Span", no service) are not spans and are skipped, so the count matches
`totalSpansCount`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from collector.formats.ids import SPAN_ID_HEX_DIGITS, TRACE_ID_HEX_DIGITS, hex_id
from collector.formats.otlp import (
    SERVICE_NAME,
    SPAN_KIND_UNSPECIFIED,
    SPAN_KINDS_BY_NAME,
    STATUS_CODE_ERROR,
    STATUS_CODE_UNSET,
    UNKNOWN_SERVICE,
    ConvertedSpan,
    attribute_list,
    plain_attributes,
    span_kind_from_name,
    status_code_from_name,
    status_value,
    string_value,
)
from collector.formats.payload import Rejected, SpanError
from units import NS_PER_MS

_MISSING_SPAN = "Missing Span"
_MAX_START_MS = (2**63 - 1) // NS_PER_MS
_V1_REFERENCE = re.compile(r"\{TraceId=(?P<traceId>[^,}]*), SpanId=(?P<spanId>[^,}]*), RefType=(?P<refType>[^,}]*)\}")
_V1_COLUMNS = {
    "__time": "timestamp",
    "SpanId": "spanId",
    "TraceId": "traceId",
    "ServiceName": "serviceName",
    "Name": "name",
    "Kind": "kind",
    "DurationNano": "durationNano",
    "References": "references",
    "Events": "event",
    "HasError": "hasError",
    "StatusMessage": "statusMessage",
    "StatusCodeString": "statusCodeString",
    "SpanKind": "spanKind",
}
"""v1 column → the v2 key of the same value: a v1 row is read as a v2 span."""


@dataclass(frozen=True)
class _Keys:
    """Where one shape keeps each span field (None: the shape has no such field)."""

    span_id: str
    trace_id: str
    parent_id: str
    start_ms: tuple[str, ...]
    duration_ns: str
    kind_number: str | None
    kind_name: str
    status_number: str | None
    status_name: str
    status_message: str
    has_error: str
    attributes: str
    resource: str | None
    service: str | None
    events: str
    references: str | None
    trace_state: str | None


_V2 = _Keys(
    span_id="spanId",
    trace_id="traceId",
    parent_id="parentSpanId",
    start_ms=("timestamp",),
    duration_ns="durationNano",
    kind_number="kind",
    kind_name="spanKind",
    status_number=None,
    status_name="statusCodeString",
    status_message="statusMessage",
    has_error="hasError",
    attributes="tagMap",
    resource=None,
    service="serviceName",
    events="event",
    references="references",
    trace_state=None,
)
_V3 = _Keys(
    span_id="span_id",
    trace_id="trace_id",
    parent_id="parent_span_id",
    start_ms=("time_unix", "timestamp"),
    duration_ns="duration_nano",
    kind_number=None,
    kind_name="kind_string",
    status_number="status_code",
    status_name="status_code_string",
    status_message="status_message",
    has_error="has_error",
    attributes="attributes",
    resource="resource",
    service=None,
    events="events",
    references=None,
    trace_state="trace_state",
)


def is_signoz(document: object) -> bool:
    """Whether a parsed JSON document is one of the SigNoz answers the module docstring lists."""
    return _shape(document) is not None


def convert(document: object, source: str) -> Iterator[ConvertedSpan | Rejected]:
    """One span per SigNoz span of `document` (`is_signoz` true), in answer order, "Missing Span" placeholders
    skipped; a span that cannot be converted is a `Rejected` with a JSON pointer source (`<source>#/spans/3`,
    `<source>#/0/events/3` for a v1 row)."""
    shape = _shape(document)
    if shape is None:
        return
    keys, records = shape
    for pointer, raw in records:
        where = f"{source}#{pointer}"
        try:
            if not isinstance(raw, dict):
                raise SpanError(f"{raw!r} is not a span object")
            if _is_placeholder(raw, keys):
                continue
            yield replace(_converted(raw, keys), where=where)
        except SpanError as error:
            yield Rejected(where, str(error), 1)


def _shape(document: object) -> tuple[_Keys, list[tuple[str, object]]] | None:
    """The keys of the document's shape and its (JSON pointer, span) pairs, v1 rows turned into v2 spans; None for
    a document in none of the shapes."""
    if isinstance(document, dict) and isinstance(document.get("spans"), list) and document["spans"]:
        first = document["spans"][0]
        spans = [(f"/spans/{index}", span) for index, span in enumerate(document["spans"])]
        if isinstance(first, dict) and {"spanId", "durationNano"} <= first.keys():
            return _V2, spans
        if isinstance(first, dict) and {"span_id", "duration_nano"} <= first.keys():
            return _V3, spans
        return None
    if isinstance(document, list) and document and isinstance(document[0], dict):
        columns, rows = document[0].get("columns"), document[0].get("events")
        if isinstance(columns, list) and {"SpanId", "DurationNano"} <= set(columns) and isinstance(rows, list):
            return _V2, [(f"/0/events/{index}", _v1_span(columns, row)) for index, row in enumerate(rows)]
    return None


def _v1_span(columns: list, row: object) -> object:
    """A v1 row as the v2 span holding the same values; a row that is not an array is returned as is (and
    rejected)."""
    if not isinstance(row, list):
        return row
    values = dict(zip(columns, row, strict=False))
    span: dict[str, Any] = {_V1_COLUMNS[column]: value for column, value in values.items() if column in _V1_COLUMNS}
    keys, tag_values = values.get("TagsKeys") or [], values.get("TagsValues") or []
    if isinstance(keys, list) and isinstance(tag_values, list):
        span["tagMap"] = dict(zip(keys, tag_values, strict=False))
    references = span.get("references")
    if isinstance(references, list):
        span["references"] = [_v1_reference(text) for text in references]
    return span


def _v1_reference(text: object) -> object:
    """A v1 reference, printed `{TraceId=..., SpanId=..., RefType=...}`, as the v2 reference object; anything
    else is returned as is (and rejected)."""
    match = _V1_REFERENCE.fullmatch(text) if isinstance(text, str) else None
    return match.groupdict() if match else text


def _is_placeholder(raw: dict, keys: _Keys) -> bool:
    """Whether a span is the "Missing Span" SigNoz's waterfall builds for a parent it has no data for (no
    service, no attributes; `NewMissingWaterfallSpan`, or `model.Span` with `Name: "Missing Span"`)."""
    service = raw.get(keys.service) if keys.service else (raw.get(keys.resource or "") or {}).get(SERVICE_NAME)
    return raw.get("name") == _MISSING_SPAN and not service and not raw.get(keys.attributes)


def _converted(raw: dict, keys: _Keys) -> ConvertedSpan:
    trace_id = hex_id(raw.get(keys.trace_id), TRACE_ID_HEX_DIGITS, keys.trace_id)
    span_id = hex_id(raw.get(keys.span_id), SPAN_ID_HEX_DIGITS, keys.span_id)
    start_key = next((key for key in keys.start_ms if key in raw), keys.start_ms[0])
    start_ms = _count(raw.get(start_key), start_key, "milliseconds")
    if start_ms > _MAX_START_MS:
        # A nanosecond start in a millisecond field would otherwise land hundreds of millennia ahead.
        raise SpanError(f"{start_key} {start_ms} is not milliseconds since the epoch (SigNoz sends milliseconds)")
    start = start_ms * NS_PER_MS
    end = start + _count(raw.get(keys.duration_ns), keys.duration_ns, "nanoseconds")
    name = raw.get("name", "")
    if not isinstance(name, str):
        raise SpanError(f"name {name!r} is not a string")
    attributes = _attributes(raw, keys)
    span: dict[str, Any] = {"traceId": trace_id, "spanId": span_id}
    parent, links = _parent_and_links(raw, keys, trace_id)
    if parent:
        span["parentSpanId"] = parent
    trace_state = raw.get(keys.trace_state) if keys.trace_state else None
    if isinstance(trace_state, str) and trace_state:
        span["traceState"] = trace_state
    span.update(name=name, kind=_kind(raw, keys), startTimeUnixNano=str(start), endTimeUnixNano=str(end))
    if attributes:
        span["attributes"] = attribute_list(attributes)
    events = _events(raw.get(keys.events), keys.events)
    if events:
        span["events"] = events
    if links:
        span["links"] = links
    status = _status(raw, keys)
    if status:
        span["status"] = status
    return ConvertedSpan({"attributes": attribute_list(_resource(raw, keys))}, {}, span)


def _count(value: object, field: str, unit: str) -> int:
    """A non-negative integer count of `unit`: a JSON integer, an integral float, or decimal text (v1 prints
    `DurationNano` as text). Raises SpanError naming `field` otherwise."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpanError(f"{field} {value!r} is not a non-negative integer number of {unit}")
    return value


def _attributes(raw: dict, keys: _Keys) -> dict[str, dict]:
    """The span attributes: v3's typed `attributes`, or the v2/v1 `tagMap` (text; the resource's `service.name`
    left out)."""
    attributes = plain_attributes(raw.get(keys.attributes), keys.attributes)
    if keys.resource is None:
        attributes.pop(SERVICE_NAME, None)
    return attributes


def _resource(raw: dict, keys: _Keys) -> dict[str, dict]:
    """The resource attributes: v3's `resource`, or only `service.name` from `serviceName` (v2, v1)."""
    if keys.resource is not None:
        resource = plain_attributes(raw.get(keys.resource), keys.resource)
    else:
        service = raw.get(keys.service or "")
        resource = {SERVICE_NAME: string_value(service)} if isinstance(service, str) and service else {}
    resource.setdefault(SERVICE_NAME, string_value(UNKNOWN_SERVICE))
    return resource


def _kind(raw: dict, keys: _Keys) -> int:
    number = raw.get(keys.kind_number) if keys.kind_number else None
    if isinstance(number, str) and number.isdigit():
        number = int(number)  # v1 prints the kind number as text
    if isinstance(number, int) and not isinstance(number, bool) and number in SPAN_KINDS_BY_NAME.values():
        return number
    name = raw.get(keys.kind_name)
    if name in (None, ""):
        return SPAN_KIND_UNSPECIFIED
    kind = span_kind_from_name(str(name))
    if kind is None:
        raise SpanError(f"{keys.kind_name} {name!r} is not a span kind such as 'Server'")
    return kind


def _status(raw: dict, keys: _Keys) -> dict:
    number = raw.get(keys.status_number) if keys.status_number else None
    name = raw.get(keys.status_name)
    if isinstance(number, int) and not isinstance(number, bool) and number in (0, 1, 2):
        code = number
    elif isinstance(name, str) and status_code_from_name(name) is not None:
        code = status_code_from_name(name) or STATUS_CODE_UNSET
    else:
        code = STATUS_CODE_UNSET
    if code == STATUS_CODE_UNSET and raw.get(keys.has_error) is True:
        code = STATUS_CODE_ERROR
    message = raw.get(keys.status_message)
    return status_value(code, message if isinstance(message, str) else "")


def _parent_and_links(raw: dict, keys: _Keys, trace_id: str) -> tuple[str, list[dict]]:
    """The parent span ID ("" for a root) and the links: the parent is `parentSpanId`, else the first CHILD_OF
    reference; the other references are links."""
    parent = raw.get(keys.parent_id) or ""
    if parent:
        parent = hex_id(parent, SPAN_ID_HEX_DIGITS, keys.parent_id)
    references = raw.get(keys.references) if keys.references else None
    if references is None:
        return parent, []
    if not isinstance(references, list):
        raise SpanError(f"{keys.references} is not a list")
    links = []
    for index, reference in enumerate(references):
        where = f"{keys.references}[{index}]"
        if not isinstance(reference, dict):
            raise SpanError(f"{where} {reference!r} is not a reference")
        if not reference.get("spanId"):
            continue  # SigNoz's placeholder for a root: CHILD_OF with no span
        ref_span = hex_id(reference["spanId"], SPAN_ID_HEX_DIGITS, f"{where}.spanId")
        ref_trace = hex_id(reference.get("traceId") or trace_id, TRACE_ID_HEX_DIGITS, f"{where}.traceId")
        if not parent and reference.get("refType", "CHILD_OF") == "CHILD_OF" and ref_trace == trace_id:
            parent = ref_span
        elif ref_span != parent:
            links.append({"traceId": ref_trace, "spanId": ref_span})
    return parent, links


def _events(events: object, field: str) -> list[dict]:
    """SigNoz events (objects, or that JSON in strings) as OTLP events: `timeUnixNano` ns, `attributeMap` (or
    `attributes`) as attributes."""
    if events is None:
        return []
    if not isinstance(events, list):
        raise SpanError(f"{field} is not a list")
    converted = []
    for index, event in enumerate(events):
        where = f"{field}[{index}]"
        if isinstance(event, str):
            try:
                event = json.loads(event)
            except json.JSONDecodeError as exc:
                raise SpanError(f"{where} is not an event in JSON: {exc.msg}") from None
        if not isinstance(event, dict):
            raise SpanError(f"{where} {event!r} is not an event object")
        time = _count(event.get("timeUnixNano"), f"{where}.timeUnixNano", "nanoseconds")
        name = event.get("name", "")
        result: dict[str, Any] = {"timeUnixNano": str(time), "name": name if isinstance(name, str) else str(name)}
        found = event.get("attributeMap", event.get("attributes"))
        attributes = plain_attributes(found, f"{where}.attributeMap")
        if attributes:
            result["attributes"] = attribute_list(attributes)
        converted.append(result)
    return converted
