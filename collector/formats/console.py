"""The OpenTelemetry SDK's `ConsoleSpanExporter` output, converted to OTLP-JSON.

Shape (opentelemetry-sdk `ReadableSpan.to_json`, checked with opentelemetry-sdk 1.45.1): one JSON object per
span, indented and written one after another with nothing between them, so the file is neither one JSON
document nor JSON lines. Each object holds `name`, `context` (`trace_id` and `span_id` as `0x`-prefixed hex,
`trace_state`), `kind` as Python prints the enum (`SpanKind.SERVER`), `parent_id` (`0x` hex or null),
`start_time` and `end_time` as ISO-8601 UTC with microseconds (`2026-12-04T15:41:51.793843Z`; `end_time` is null
for a span printed before it ended), `status` (`status_code` `UNSET`/`OK`/`ERROR`, optional `description`),
`attributes` as a plain JSON object, `events` (`name`, `timestamp`, `attributes`), `links` (`context`,
`attributes`) and `resource` (`attributes`, `schema_url`). The instrumentation scope is not printed.

A span printed twice (a processor that also prints at start, or a dump concatenated from two runs) is one span:
the copies are merged by (trace ID, span ID), the ended copy kept; a span never printed ended is rejected.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from collector.formats.ids import SPAN_ID_HEX_DIGITS, TRACE_ID_HEX_DIGITS, hex_id
from collector.formats.otlp import (
    ConvertedSpan,
    attribute_list,
    plain_attributes,
    span_kind_from_name,
    status_code_from_name,
    status_value,
)
from collector.formats.payload import Rejected, SpanError
from collector.formats.times import rfc3339_to_nanos


def is_console_span(value: object) -> bool:
    """Whether a parsed JSON value is one span as `ConsoleSpanExporter` prints it: an object with a
    `context` object holding `trace_id` and `span_id`, and a `kind` that starts with `SpanKind.`."""
    if not isinstance(value, dict):
        return False
    context = value.get("context")
    kind = value.get("kind")
    return (
        isinstance(context, dict)
        and "trace_id" in context
        and "span_id" in context
        and isinstance(kind, str)
        and kind.startswith("SpanKind.")
    )


def concatenated_values(text: str) -> Iterator[tuple[int, Any]]:
    """The JSON values of text that holds several written one after another (whitespace between them
    allowed), each with the 1-based line it starts on.

    Raises json.JSONDecodeError at the first place that does not start a JSON value; RecursionError for
    nesting too deep to read.
    """
    decoder = json.JSONDecoder()
    position = line_start = 0  # line_start: where the last value started, on line `line`
    line = 1
    end = len(text)
    while True:
        while position < end and text[position].isspace():
            position += 1
        if position == end:
            return
        line += text.count("\n", line_start, position)
        value, next_position = decoder.raw_decode(text, position)
        yield line, value
        line_start, position = position, next_position


def is_console_dump(text: str) -> bool:
    """Whether text (that is not one JSON document) starts with a `ConsoleSpanExporter` span."""
    try:
        first = next(concatenated_values(text), None)
    except (json.JSONDecodeError, RecursionError):
        return False
    return first is not None and is_console_span(first[1])


def convert(text: str, source: str) -> Iterator[ConvertedSpan | Rejected]:
    """The spans of a `ConsoleSpanExporter` dump (or one span, or a JSON array of them) as OTLP-JSON.

    First a `Rejected` for each printed object that cannot be read (source `<source>:<line>`, the line the
    object starts on); then one per distinct (trace ID, span ID) that no copy printed ended (`end_time` null
    in every copy); then the first ended copy of each other span, converted, in print order. A file that stops
    being JSON part way is rejected from there on (one `Rejected`, span count unknown, at the line where JSON
    stops); what came before is kept.
    """
    printed: dict[tuple[str, str], tuple[str, dict]] = {}
    unended: dict[tuple[str, str], str] = {}
    for where, raw in _printed_spans(text, source):
        if isinstance(raw, Rejected):
            yield raw
            continue
        try:
            key = _ids(raw)
        except SpanError as error:
            yield Rejected(where, str(error), 1)
            continue
        if raw.get("end_time") is None:
            unended.setdefault(key, where)
            continue
        printed.setdefault(key, (where, raw))
    for key, where in unended.items():
        if key not in printed:
            yield Rejected(where, "printed only before it ended (end_time is null) and never again", 1)
    for where, raw in printed.values():
        try:
            yield replace(_converted(raw), where=where)
        except SpanError as error:
            yield Rejected(where, str(error), 1)


def _printed_spans(text: str, source: str) -> Iterator[tuple[str, dict | Rejected]]:
    """(source, printed span) for each JSON value of `text` (each element of an array), or a `Rejected` in its
    place for a value that is not a span and for text that stops being JSON (then nothing after it is read)."""
    try:
        for line, value in concatenated_values(text):
            items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
            for index, item in items:
                where = f"{source}:{line}" if index is None else f"{source}:{line}#/{index}"
                if is_console_span(item):
                    yield where, item
                else:
                    reason = "not a span as ConsoleSpanExporter prints it (context, kind 'SpanKind.X')"
                    yield where, Rejected(where, reason, 1)
    except json.JSONDecodeError as exc:
        where = f"{source}:{exc.lineno}"
        yield where, Rejected(where, f"not JSON from column {exc.colno} on ({exc.msg}); the rest is not read", None)
    except RecursionError:
        yield source, Rejected(source, "JSON nested too deeply to read; the rest is not read", None)


def _ids(raw: dict) -> tuple[str, str]:
    context = raw["context"]
    return (
        _hex(context.get("trace_id"), TRACE_ID_HEX_DIGITS, "context.trace_id"),
        _hex(context.get("span_id"), SPAN_ID_HEX_DIGITS, "context.span_id"),
    )


def _hex(value: object, digits: int, field: str) -> str:
    """A `0x`-prefixed hex ID as OTLP-JSON hex. Raises SpanError naming `field`."""
    if not isinstance(value, str) or not value.startswith("0x"):
        raise SpanError(f"{field} {value!r} is not a 0x-prefixed hex ID")
    return hex_id(value[2:], digits, field)


def _converted(raw: dict) -> ConvertedSpan:
    trace_id, span_id = _ids(raw)
    kind_name = raw.get("kind")
    kind = span_kind_from_name(kind_name) if isinstance(kind_name, str) else None
    if kind is None:
        raise SpanError(f"kind {kind_name!r} is not a span kind such as 'SpanKind.INTERNAL'")
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": _text(raw.get("name"), "name"),
        "kind": kind,
        "startTimeUnixNano": str(rfc3339_to_nanos(raw.get("start_time"), "start_time")),
        "endTimeUnixNano": str(rfc3339_to_nanos(raw.get("end_time"), "end_time")),
        "attributes": attribute_list(plain_attributes(raw.get("attributes"), "attributes")),
        "status": _status(raw.get("status")),
    }
    if raw.get("parent_id") is not None:
        span["parentSpanId"] = _hex(raw["parent_id"], SPAN_ID_HEX_DIGITS, "parent_id")
    events = [_event(event, f"events/{index}") for index, event in enumerate(_list(raw.get("events"), "events"))]
    links = [_link(link, f"links/{index}") for index, link in enumerate(_list(raw.get("links"), "links"))]
    if events:
        span["events"] = events
    if links:
        span["links"] = links
    resource = raw.get("resource") or {}
    if not isinstance(resource, dict):
        raise SpanError(f"resource {resource!r} is not an object")
    attributes = attribute_list(plain_attributes(resource.get("attributes"), "resource.attributes"))
    return ConvertedSpan({"attributes": attributes}, {}, span)


def _status(raw: object) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SpanError(f"status {raw!r} is not an object")
    name = raw.get("status_code", "UNSET")
    code = status_code_from_name(name) if isinstance(name, str) else None
    if code is None:
        raise SpanError(f"status.status_code {name!r} is not UNSET, OK or ERROR")
    return status_value(code, _text(raw.get("description", ""), "status.description"))


def _event(raw: object, field: str) -> dict:
    if not isinstance(raw, dict):
        raise SpanError(f"{field} {raw!r} is not an object")
    return {
        "name": _text(raw.get("name", ""), f"{field}.name"),
        "timeUnixNano": str(rfc3339_to_nanos(raw.get("timestamp"), f"{field}.timestamp")),
        "attributes": attribute_list(plain_attributes(raw.get("attributes"), f"{field}.attributes")),
    }


def _link(raw: object, field: str) -> dict:
    if not isinstance(raw, dict) or not isinstance(raw.get("context"), dict):
        raise SpanError(f"{field} {raw!r} is not an object with a context")
    context = raw["context"]
    return {
        "traceId": _hex(context.get("trace_id"), TRACE_ID_HEX_DIGITS, f"{field}.context.trace_id"),
        "spanId": _hex(context.get("span_id"), SPAN_ID_HEX_DIGITS, f"{field}.context.span_id"),
        "attributes": attribute_list(plain_attributes(raw.get("attributes"), f"{field}.attributes")),
    }


def _list(value: object, field: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpanError(f"{field} {value!r} is not an array")
    return value


def _text(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise SpanError(f"{field} {value!r} is not a string")
    return value
