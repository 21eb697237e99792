"""OTLP/JSON → protobuf ``ExportTraceServiceRequest``, following the OTLP/JSON encoding rules.

Not protobuf's generic JSON parser: that reads ``traceId``/``spanId`` as base64, while OTLP/JSON
writes them as hex (OTLP specification, "JSON Protobuf Encoding"). Here IDs are hex in any case,
or base64 as some senders write them; enums are integers (their proto names are accepted too);
64-bit integers may be strings or numbers; field names are lowerCamelCase, or the proto's own
snake_case names (:func:`camel_case_keys`); unknown fields are ignored. A span that cannot be read
is skipped and reported as a :class:`~collector.rejections.Rejection`; its batch-mates are kept.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from collector.rejections import Rejection, SpanError
from storage.ids import SPAN_ID_BYTES, TRACE_ID_BYTES, IdError, id_bytes_from_text


class JsonPayloadError(ValueError):
    """The body is not an OTLP/JSON ExportTraceServiceRequest at all (answered with HTTP 400)."""


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

_SNAKE_KEY = re.compile(rb'_[a-z]+"\s*:')
"""The end of an object key with an underscore (``"trace_id":``): no OTLP/JSON key (lowerCamelCase) has one.
Inside a string value a quote is escaped (``\\"``), so attribute keys and text never match; a scan costs about
2 % of ``json.loads``."""
_SNAKE_KEY_TEXT = re.compile(_SNAKE_KEY.pattern.decode())


def has_snake_case_key(text: str | bytes) -> bool:
    """Whether the JSON ``text`` may hold an object key with an underscore (:data:`_SNAKE_KEY`): when it does not,
    :func:`camel_case_keys` would rename nothing and its walk (about a third of the cost of reading a span's
    attributes into protobuf) can be left out."""
    return (_SNAKE_KEY.search(text) if isinstance(text, bytes) else _SNAKE_KEY_TEXT.search(text)) is not None


PROTOBUF_DEPTH_LIMIT = 100
"""Deepest message nesting the protobuf runtime parses (``google.protobuf``'s default recursion limit, the same in
its upb and C++ backends): messages nest at most this deep below the ``ExportTraceServiceRequest`` (level 0). A
JSON body is re-encoded and parsed again at the insert, so an attribute value nested past this limit would be
answered 200 and never stored: such a span is refused here instead (``tests/collector/test_otlp_json_depth.py``
holds the two to the same edge).
"""

RESOURCE_VALUE_LEVEL = 4
"""Message level of a resource attribute's ``AnyValue``: request (0) > ResourceSpans > Resource > KeyValue >
AnyValue."""

SCOPE_VALUE_LEVEL = 5
"""... > ScopeSpans > InstrumentationScope > KeyValue > AnyValue."""

SPAN_VALUE_LEVEL = 5
"""... > ScopeSpans > Span > KeyValue > AnyValue."""

EVENT_VALUE_LEVEL = 6
"""... > Span > Event (or Link) > KeyValue > AnyValue."""


def request_from_json(body: Any) -> tuple[ExportTraceServiceRequest, list[Rejection]]:
    """Convert a parsed OTLP/JSON body into the protobuf request, skipping unreadable spans.

    Args:
        body: the result of ``json.loads`` on the request body.

    Returns:
        The request, and one rejection per unreadable span. An unreadable span stays in the request
        as an empty ``Span`` at its position (so positions and paths match the body); the
        rejection's ``position`` names it, and :func:`collector.batch.to_batch` skips it.

    Raises:
        JsonPayloadError: the top level is not an object with a ``resourceSpans`` list, or a
            resource or scope entry is not an object.
    """
    if not isinstance(body, dict):
        raise JsonPayloadError("body must be a JSON object with a 'resourceSpans' array")
    resource_spans = _array(body, "resourceSpans", "'resourceSpans'")
    request = ExportTraceServiceRequest()
    rejections: list[Rejection] = []
    for r_index, rs_json in enumerate(resource_spans):
        r_path = f"resourceSpans[{r_index}]"
        _require_object(rs_json, r_path)
        rs = request.resource_spans.add()
        _fill_resource(rs, rs_json, r_path)
        scope_spans = _array(rs_json, "scopeSpans", f"{r_path}.scopeSpans")
        for s_index, ss_json in enumerate(scope_spans):
            s_path = f"{r_path}.scopeSpans[{s_index}]"
            _require_object(ss_json, s_path)
            ss = rs.scope_spans.add()
            _fill_scope(ss, ss_json, s_path)
            spans = _array(ss_json, "spans", f"{s_path}.spans")
            for p_index, span_json in enumerate(spans):
                try:
                    span = _span(span_json)
                except SpanError as exc:
                    # An empty placeholder keeps the positions of the request equal to the body's.
                    rejections.append(Rejection.at((r_index, s_index, p_index), str(exc)))
                    span = Span()
                ss.spans.append(span)
    return request, rejections


def camel_case_keys(document: Any) -> Any:
    """``document`` with every object key written as the proto's original field name (``resource_spans``,
    ``trace_id``, ``start_time_unix_nano``: protobuf's JSON printers with ``preserving_proto_field_name``) renamed
    to its lowerCamelCase JSON name, at any depth; the same object when no key needed renaming.

    The OTLP specification allows only the lowerCamelCase names and tells receivers to ignore unknown fields, which
    would answer such a body 200 and store none of it; the OpenTelemetry Collector's and Jaeger's OTLP/JSON readers
    accept both spellings of every field, and so does Hotspan. Where one object holds both spellings of a field,
    two lists (a repeated field) are joined, lowerCamelCase's first, so no span is dropped; of two other values the
    lowerCamelCase one is kept. No trace message has a map field, so every object key is a field name (attribute
    keys are values of ``key``) and renaming cannot touch data.
    """
    if isinstance(document, list):
        # Leaves (most of a document) are not walked into: a call per leaf cost as much as the walk itself.
        renamed = [camel_case_keys(item) if isinstance(item, (dict, list)) else item for item in document]
        return document if all(new is old for new, old in zip(renamed, document, strict=True)) else renamed
    if not isinstance(document, dict):
        return document
    out: dict[str, Any] = {}
    changed = False
    for name, value in document.items():
        new_value = camel_case_keys(value) if isinstance(value, (dict, list)) else value
        changed |= new_value is not value
        key = _lower_camel(name) if "_" in name else name
        changed |= key != name
        if key not in out:
            out[key] = new_value
        elif isinstance(out[key], list) and isinstance(new_value, list):
            out[key] = [*new_value, *out[key]] if key == name else [*out[key], *new_value]
        elif key == name:
            out[key] = new_value
    return out if changed else document


def _lower_camel(name: str) -> str:
    """``start_time_unix_nano`` → ``startTimeUnixNano`` (protobuf's JSON name rule); names without ``_`` as they are."""
    if "_" not in name:
        return name
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def parse_json_bytes(raw: bytes) -> Any:
    """``json.loads`` with an error that says where the body is broken, its keys in lowerCamelCase
    (:func:`camel_case_keys`, walked only when the text holds a key with an underscore).

    Raises:
        JsonPayloadError: not UTF-8 or not JSON.
    """
    try:
        document = json.loads(raw)
        return camel_case_keys(document) if has_snake_case_key(raw) else document
    except UnicodeDecodeError as exc:
        raise JsonPayloadError(f"body is not UTF-8: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise JsonPayloadError(f"body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError as exc:
        raise JsonPayloadError("body nests too deeply") from exc


def _array(container: dict[str, Any], name: str, path: str) -> list[Any]:
    """The list field ``name`` of a request-level object: empty when absent or ``null`` (proto3's JSON mapping reads
    ``null`` as the field's default, and OpenTelemetry JS writes it), a 400 for anything else but a list."""
    value = container.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise JsonPayloadError(f"{path} must be an array")
    return value


def _require_object(value: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise JsonPayloadError(f"{path} must be an object")


def _fill_resource(rs: ResourceSpans, rs_json: dict[str, Any], path: str) -> None:
    resource = rs_json.get("resource") or {}
    _require_object(resource, f"{path}.resource")
    try:
        _fill_attributes(
            rs.resource.attributes, resource.get("attributes"), f"{path}.resource.attributes", RESOURCE_VALUE_LEVEL
        )
    except SpanError as exc:
        raise JsonPayloadError(str(exc)) from exc
    rs.schema_url = _resource_str(rs_json.get("schemaUrl"), f"{path}.schemaUrl")


def _fill_scope(ss: ScopeSpans, ss_json: dict[str, Any], path: str) -> None:
    scope = ss_json.get("scope") or {}
    _require_object(scope, f"{path}.scope")
    ss.scope.name = _resource_str(scope.get("name"), f"{path}.scope.name")
    ss.scope.version = _resource_str(scope.get("version"), f"{path}.scope.version")
    try:
        _fill_attributes(ss.scope.attributes, scope.get("attributes"), f"{path}.scope.attributes", SCOPE_VALUE_LEVEL)
    except SpanError as exc:
        raise JsonPayloadError(str(exc)) from exc
    ss.schema_url = _resource_str(ss_json.get("schemaUrl"), f"{path}.schemaUrl")


def _span(span_json: Any) -> Span:
    if not isinstance(span_json, dict):
        raise SpanError("span must be an object")
    span = Span()
    span.trace_id = _id(span_json.get("traceId"), TRACE_ID_BYTES, "traceId", required=True)
    span.span_id = _id(span_json.get("spanId"), SPAN_ID_BYTES, "spanId", required=True)
    span.parent_span_id = _id(span_json.get("parentSpanId"), SPAN_ID_BYTES, "parentSpanId", required=False)
    span.trace_state = _str(span_json.get("traceState"), "traceState")
    span.name = _str(span_json.get("name"), "name")
    span.kind = _enum(span_json.get("kind"), Span.SpanKind, "kind")
    span.start_time_unix_nano = _uint64(span_json.get("startTimeUnixNano"), "startTimeUnixNano")
    span.end_time_unix_nano = _uint64(span_json.get("endTimeUnixNano"), "endTimeUnixNano")
    span.flags = _uint64(span_json.get("flags"), "flags") & 0xFFFFFFFF
    _fill_attributes(span.attributes, span_json.get("attributes"), "attributes", SPAN_VALUE_LEVEL)
    for e_index, event_json in enumerate(_list(span_json.get("events"), "events")):
        where = f"events[{e_index}]"
        if not isinstance(event_json, dict):
            raise SpanError(f"{where} must be an object")
        event = span.events.add()
        event.time_unix_nano = _uint64(event_json.get("timeUnixNano"), f"{where}.timeUnixNano")
        event.name = _str(event_json.get("name"), f"{where}.name")
        _fill_attributes(event.attributes, event_json.get("attributes"), f"{where}.attributes", EVENT_VALUE_LEVEL)
    for l_index, link_json in enumerate(_list(span_json.get("links"), "links")):
        where = f"links[{l_index}]"
        if not isinstance(link_json, dict):
            raise SpanError(f"{where} must be an object")
        link = span.links.add()
        link.trace_id = _id(link_json.get("traceId"), TRACE_ID_BYTES, f"{where}.traceId", required=True)
        link.span_id = _id(link_json.get("spanId"), SPAN_ID_BYTES, f"{where}.spanId", required=True)
        link.trace_state = _str(link_json.get("traceState"), f"{where}.traceState")
        _fill_attributes(link.attributes, link_json.get("attributes"), f"{where}.attributes", EVENT_VALUE_LEVEL)
    status_json = span_json.get("status") or {}
    if not isinstance(status_json, dict):
        raise SpanError("status must be an object")
    span.status.code = _enum(status_json.get("code"), Status.StatusCode, "status.code")
    span.status.message = _str(status_json.get("message"), "status.message")
    return span


def _id(value: Any, size: int, field: str, *, required: bool) -> bytes:
    if value in (None, ""):
        if required:
            raise SpanError(f"{field} is missing")
        return b""
    if not isinstance(value, str):
        raise SpanError(f"{field} must be a string, got {type(value).__name__}")
    try:
        return id_bytes_from_text(value, size)
    except IdError as exc:
        raise SpanError(f"{field} {exc}") from exc


def _enum(value: Any, enum: Any, field: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool):
        raise SpanError(f"{field} must be an integer enum value, got {value!r}")
    if isinstance(value, int):
        if value not in enum.values():
            raise SpanError(f"{field} {value} is not one of {sorted(enum.values())}")
        return value
    if isinstance(value, str):
        try:
            return int(enum.Value(value))
        except ValueError:
            raise SpanError(f"{field} {value!r} is not one of {list(enum.keys())}") from None
    raise SpanError(f"{field} must be an integer enum value, got {value!r}")


def _uint64(value: Any, field: str) -> int:
    number = _int(value, field)
    if not 0 <= number < 2**64:
        raise SpanError(f"{field} {value!r} is outside the unsigned 64-bit range")
    return number


def _int(value: Any, field: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool):
        raise SpanError(f"{field} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise SpanError(f"{field} must be an integer (number or decimal string), got {value!r}")


def _str(value: Any, field: str) -> str:
    """A string field: absent (None) is ``""``; any other type is refused, as protobuf's JSON parser refuses it,
    rather than stored as ``""`` (the value lost behind a 200)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SpanError(f"{field} must be a string, got {type(value).__name__}")
    return _text(value)


def _resource_str(value: Any, field: str) -> str:
    """:func:`_str` of a resource's or scope's field, which every span of it shares: a wrong type fails the request."""
    try:
        return _str(value, field)
    except SpanError as exc:
        raise JsonPayloadError(str(exc)) from exc


def _text(value: str) -> str:
    """``value`` with lone UTF-16 surrogates (legal in JSON's ``\\uD800`` escapes, not in UTF-8 or
    protobuf strings) replaced by U+FFFD, so the span is stored instead of failing the request."""
    if value.isascii():
        return value
    return _LONE_SURROGATE.sub("\ufffd", value)


def _list(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpanError(f"{field} must be an array")
    return value


def _fill_attributes(target: Any, items: Any, field: str, level: int) -> None:
    """Fill ``target`` (a repeated ``KeyValue``) from ``items``; ``level``: the message level of each value."""
    for index, item in enumerate(_list(items, field)):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise SpanError(f"{field}[{index}] must be an object with a string 'key'")
        kv: KeyValue = target.add()
        kv.key = _text(item["key"])
        _fill_value(kv.value, item.get("value"), f"{field}[{index}].value", level)


def _fill_value(target: AnyValue, value: Any, field: str, level: int) -> None:
    """Fill one ``AnyValue`` at message level ``level`` (:data:`PROTOBUF_DEPTH_LIMIT`)."""
    if level > PROTOBUF_DEPTH_LIMIT:
        raise SpanError(f"{field} nests deeper than protobuf's {PROTOBUF_DEPTH_LIMIT} message levels")
    if value is None:
        return
    if not isinstance(value, dict):
        raise SpanError(f"{field} must be an AnyValue object, got {type(value).__name__}")
    # The first member set wins, in this order. A member set to null is not set (proto3's JSON mapping):
    # OpenTelemetry JS writes a NaN double so, as JSON.stringify(NaN) is null. The value is then empty, as an
    # AnyValue with no member is.
    for key, fill in _MEMBERS:
        member = value.get(key)
        if member is not None:
            fill(target, member, field, level)
            return


def _fill_string(target: AnyValue, value: Any, field: str, level: int) -> None:
    target.string_value = _text(_typed(value, str, field))


def _fill_bool(target: AnyValue, value: Any, field: str, level: int) -> None:
    target.bool_value = _typed(value, bool, field)


def _fill_int(target: AnyValue, value: Any, field: str, level: int) -> None:
    target.int_value = _int64(value, field)


def _fill_double(target: AnyValue, value: Any, field: str, level: int) -> None:
    target.double_value = _double(value, field)


def _fill_bytes(target: AnyValue, value: Any, field: str, level: int) -> None:
    target.bytes_value = _bytes(value, field)


def _fill_array(target: AnyValue, value: Any, field: str, level: int) -> None:
    """AnyValue > ArrayValue > AnyValue: each element two levels below ``level``."""
    target.array_value.SetInParent()
    values = value.get("values") if isinstance(value, dict) else None
    for index, item in enumerate(_list(values, f"{field}.arrayValue.values")):
        _fill_value(target.array_value.values.add(), item, f"{field}.arrayValue.values[{index}]", level + 2)


def _fill_kvlist(target: AnyValue, value: Any, field: str, level: int) -> None:
    """AnyValue > KeyValueList > KeyValue > AnyValue: each value three levels below ``level``."""
    target.kvlist_value.SetInParent()
    values = value.get("values") if isinstance(value, dict) else None
    _fill_attributes(target.kvlist_value.values, values, f"{field}.kvlistValue.values", level + 3)


_MEMBERS: tuple[tuple[str, Callable[[AnyValue, Any, str, int], None]], ...] = (
    ("stringValue", _fill_string),
    ("boolValue", _fill_bool),
    ("intValue", _fill_int),
    ("doubleValue", _fill_double),
    ("bytesValue", _fill_bytes),
    ("arrayValue", _fill_array),
    ("kvlistValue", _fill_kvlist),
)
"""``AnyValue``'s members in OTLP/JSON and how each fills the message; one table built once, not per value."""


def _typed(value: Any, kind: type, field: str) -> Any:
    if not isinstance(value, kind):
        raise SpanError(f"{field} must be a {kind.__name__}, got {value!r}")
    return value


def _int64(value: Any, field: str) -> int:
    number = _int(value, field)
    if not -(2**63) <= number < 2**63:
        raise SpanError(f"{field} {value!r} is outside the signed 64-bit range")
    return number


def _double(value: Any, field: str) -> float:
    special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
    if isinstance(value, str) and value in special:
        return special[value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise SpanError(f"{field} must be a number, got {value!r}")


def _bytes(value: Any, field: str) -> bytes:
    if not isinstance(value, str):
        raise SpanError(f"{field} must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SpanError(f"{field} is not valid base64") from exc
