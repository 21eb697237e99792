"""any-agent's `AgentTrace` JSON, converted to OTLP-JSON spans.

Shape (repository mozilla-ai/any-agent, `src/any_agent/tracing/agent_trace.py`, whose value types
`src/any_agent/tracing/otel_types.py` re-exports from mozilla-ai/tinyagent's `src/tinyagent/tracing/otel_types.py`;
example files: any-agent's `tests/assets/*_trace.json`): what `agent_trace.model_dump_json()` writes, `{"spans":
[span, ...], "final_output": ...}`, and a bare array of spans. A span (`AgentSpan`) holds `name`, `kind` (`internal`,
`server`, `client`, `producer`, `consumer`), `parent` and `context` (`SpanContext`: `trace_id` and `span_id` as
**decimal integers** of 128 and 64 bits, `trace_state` `{"entries": {key: value}}`; a root's `parent` has both IDs
null, or is null), `start_time` and `end_time` (**nanoseconds** since the epoch, null when unknown), `status`
(`status_code` `unset`/`ok`/`error`, `description`), `attributes` (plain JSON values, the OpenTelemetry GenAI
attributes any-agent writes: `gen_ai.operation.name` `call_llm`/`execute_tool`/`invoke_agent`, token counts ...),
`links` (`context`, `attributes`), `events` (`name`, `timestamp` in ns, `attributes`) and `resource` (`attributes`,
`schema_url`). The instrumentation scope is not written, and `schema_url` has no place on a converted span's
resource, so neither is kept.

IDs become hex (32 and 16 digits); the resource's `service.name` (the OTel SDK writes `unknown_service` when none
was set) names the service. A span without a start or an end time cannot be placed and is rejected.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from collector.formats.otlp import (
    SERVICE_NAME,
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

_TRACE_ID_BITS = 128
_SPAN_ID_BITS = 64


def spans(document: object) -> tuple[str, list] | None:
    """The spans of an any-agent trace and the JSON pointer of their array (`/spans`, or `` for a bare array),
    or None when the document is not one.

    It is one when the first span is an object whose `context` holds `trace_id` and `span_id` and which has
    `start_time`; the OpenTelemetry SDK's ConsoleSpanExporter spans, the nearest other shape, have `context` too
    but `start_time` as ISO text and `kind` as `SpanKind.X` (they are recognised before this).
    """
    if isinstance(document, dict) and isinstance(document.get("spans"), list):
        pointer, items = "/spans", document["spans"]
    elif isinstance(document, list):
        pointer, items = "", document
    else:
        return None
    first = items[0] if items else None
    if not isinstance(first, dict) or "start_time" not in first:
        return None
    context = first.get("context")
    if not isinstance(context, dict) or not {"trace_id", "span_id"} <= context.keys():
        return None
    return pointer, items


def convert(document: object, source: str) -> Iterator[ConvertedSpan | Rejected]:
    """One span per `AgentSpan` (`spans(document)` not None), in file order; a span that cannot be converted is a
    `Rejected` with a JSON pointer source (`<source>#/spans/3`)."""
    found = spans(document)
    if found is None:
        return
    pointer, items = found
    for index, raw in enumerate(items):
        where = f"{source}#{pointer}/{index}"
        try:
            yield replace(_converted(raw), where=where)
        except SpanError as error:
            yield Rejected(where, str(error), 1)


def _converted(raw: object) -> ConvertedSpan:
    if not isinstance(raw, dict):
        raise SpanError(f"{raw!r} is not a span object")
    context = raw.get("context")
    if not isinstance(context, dict):
        raise SpanError("context is not a span context object")
    trace_id = _id(context.get("trace_id"), _TRACE_ID_BITS, "context.trace_id")
    span_id = _id(context.get("span_id"), _SPAN_ID_BITS, "context.span_id")
    name = raw.get("name")
    if not isinstance(name, str):
        raise SpanError(f"name {name!r} is not a string")
    kind = span_kind_from_name(raw["kind"]) if isinstance(raw.get("kind"), str) else None
    if kind is None:
        raise SpanError(f"kind {raw.get('kind')!r} is not a span kind such as 'internal'")
    start = _nanoseconds(raw.get("start_time"), "start_time")
    end = _nanoseconds(raw.get("end_time"), "end_time")
    span: dict[str, Any] = {"traceId": trace_id, "spanId": span_id}
    parent = raw.get("parent")
    if isinstance(parent, dict) and parent.get("span_id") is not None:
        span["parentSpanId"] = _id(parent["span_id"], _SPAN_ID_BITS, "parent.span_id")
    elif parent is not None and not isinstance(parent, dict):
        raise SpanError(f"parent {parent!r} is not a span context object")
    trace_state = _trace_state(context)
    if trace_state:
        span["traceState"] = trace_state
    span.update(name=name, kind=kind, startTimeUnixNano=str(start), endTimeUnixNano=str(end))
    attributes = plain_attributes(raw.get("attributes"), "attributes")
    if attributes:
        span["attributes"] = attribute_list(attributes)
    events = [_event(event, f"events[{index}]") for index, event in enumerate(_list(raw.get("events"), "events"))]
    if events:
        span["events"] = events
    links = [_link(link, f"links[{index}]") for index, link in enumerate(_list(raw.get("links"), "links"))]
    if links:
        span["links"] = links
    status = _status(raw.get("status"))
    if status:
        span["status"] = status
    return ConvertedSpan({"attributes": attribute_list(_resource(raw.get("resource")))}, {}, span)


def _id(value: object, bits: int, field: str) -> str:
    """A decimal integer ID of `bits` bits as lowercase hex of `bits // 4` digits.

    Raises SpanError naming `field` for anything but an integer in 1..2**bits-1 (0 is OpenTelemetry's invalid ID).
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**bits:
        raise SpanError(f"{field} {value!r} is not a {bits}-bit integer ID")
    return format(value, f"0{bits // 4}x")


def _nanoseconds(value: object, field: str) -> int:
    if value is None:
        raise SpanError(f"{field} is null: the span's time is unknown")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpanError(f"{field} {value!r} is not a non-negative integer number of nanoseconds")
    return value


def _list(value: object, field: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpanError(f"{field} is not a list")
    return value


def _trace_state(context: dict) -> str:
    """W3C `tracestate` text (`key=value,key=value`) from tinyagent's `{"entries": {...}}`; "" when empty."""
    state = context.get("trace_state")
    entries = state.get("entries") if isinstance(state, dict) else None
    if not isinstance(entries, dict):
        return ""
    return ",".join(f"{key}={value}" for key, value in entries.items())


def _event(event: object, where: str) -> dict:
    if not isinstance(event, dict):
        raise SpanError(f"{where} {event!r} is not an event object")
    name = event.get("name", "")
    converted: dict[str, Any] = {
        "timeUnixNano": str(_nanoseconds(event.get("timestamp", 0), f"{where}.timestamp")),
        "name": name if isinstance(name, str) else str(name),
    }
    attributes = plain_attributes(event.get("attributes"), f"{where}.attributes")
    if attributes:
        converted["attributes"] = attribute_list(attributes)
    return converted


def _link(link: object, where: str) -> dict:
    if not isinstance(link, dict) or not isinstance(link.get("context"), dict):
        raise SpanError(f"{where} is not a link with a span context object")
    context = link["context"]
    converted: dict[str, Any] = {
        "traceId": _id(context.get("trace_id"), _TRACE_ID_BITS, f"{where}.context.trace_id"),
        "spanId": _id(context.get("span_id"), _SPAN_ID_BITS, f"{where}.context.span_id"),
    }
    attributes = plain_attributes(link.get("attributes"), f"{where}.attributes")
    if attributes:
        converted["attributes"] = attribute_list(attributes)
    return converted


def _status(status: object) -> dict:
    if not isinstance(status, dict):
        return {}
    name = status.get("status_code")
    code = status_code_from_name(name) if isinstance(name, str) else None
    if code is None:
        raise SpanError(f"status.status_code {name!r} is not 'unset', 'ok' or 'error'")
    description = status.get("description")
    return status_value(code, description if isinstance(description, str) else "")


def _resource(resource: object) -> dict[str, dict]:
    attributes = plain_attributes(resource.get("attributes") if isinstance(resource, dict) else None, "resource")
    attributes.setdefault(SERVICE_NAME, string_value(UNKNOWN_SERVICE))
    return attributes
