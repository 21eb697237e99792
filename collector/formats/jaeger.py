"""Jaeger JSON → OTLP-JSON spans.

Shapes read (all seen in real files):

- the query API / UI download `{"data": [trace, ...], "total", "limit", "offset", "errors"}`,
- one trace object `{"traceID", "spans", "processes"}`, or a JSON array of them,
- the Jaeger UI redux state `{"data": {trace object, "services", ...}, "id", "state"}`,
- the domain model (protobuf JSON of `model.Span`/`model.Batch`): `{"spans": [...]}` with base64
  `traceId`/`spanId`, RFC 3339 `startTime`, Go-duration `duration`, the process inside each span (or
  beside the spans, as a batch's), typed tags `{"key", "vType", "vStr"|"vBool"|"vInt64"|...}`.

Spans are read one by one, so the UI form (`traceID`, µs integers, tags `{"key", "type", "value"}`) and the
domain form may even mix. Times: Jaeger µs (or RFC 3339) in, OTLP **nanoseconds** out.

Mapping rules, as the OpenTelemetry Collector's Jaeger translator does
(opentelemetry-collector-contrib `pkg/translator/jaeger/jaegerproto_to_traces.go`):

- one resource per distinct process: `service.name` plus the process tags, `hostname` renamed to
  `host.name`, `jaeger.version` to `opencensus.exporterversion` (`Jaeger-<version>`);
- typed tags → AnyValue; `span.kind` → OTLP kind; `otel.scope.name`/`otel.library.name` and their
  `version` tags → the instrumentation scope; `w3c.tracestate` → traceState (all removed from attributes);
- status: `error=true` → ERROR (tag removed), message from `otel.status_description` or
  `http.status_message`; else `otel.status_code` (OK/ERROR) with `otel.status_description`; else an HTTP
  status code (4xx on a client span and 5xx → ERROR);
- parent: the first CHILD_OF reference within the same trace, else the first FOLLOWS_FROM one (Jaeger's
  `Span.ParentSpanID`); every other reference, FOLLOWS_FROM included, becomes a link with attribute
  `opentracing.ref_type` (`child_of`/`follows_from`), so a follows-from parent stays recognisable;
- logs → events, the `event` field as name (removed from the attributes).

Differences from that translator: an event without an `event` field is named `log` (not left empty), and a
span without a process gets `service.name=unknown_service` (as the OTel SDK names such a service).
Span and trace `warnings` and `flags` are not carried over.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from collector.formats.ids import SPAN_ID_HEX_DIGITS, TRACE_ID_HEX_DIGITS, hex_id, jaeger_model_id
from collector.formats.otlp import (
    SERVICE_NAME,
    SPAN_KIND_SERVER,
    SPAN_KIND_UNSPECIFIED,
    STATUS_CODE_ERROR,
    STATUS_CODE_UNSET,
    UNKNOWN_SERVICE,
    ConvertedSpan,
    attribute_list,
    int_value,
    pop_scope,
    span_kind_from_name,
    status_code_from_name,
    status_value,
    string_value,
)
from collector.formats.payload import Rejected, SpanError
from collector.formats.times import go_duration_to_nanos, micros_to_nanos, rfc3339_to_nanos

_REF_TYPES = {"CHILD_OF": "child_of", "FOLLOWS_FROM": "follows_from"}
_DOMAIN_VALUE_FIELDS = {
    "STRING": ("vStr", ""),
    "BOOL": ("vBool", False),
    "INT64": ("vInt64", 0),
    "FLOAT64": ("vFloat64", 0.0),
    "BINARY": ("vBinary", ""),
}


def is_jaeger(document: object) -> bool:
    """Whether a parsed JSON document has one of the Jaeger shapes this module reads."""
    traces = _traces(document)
    if traces is None:
        return False
    if not traces:
        return True
    first = traces[0][1]
    spans = first.get("spans") if isinstance(first, dict) else None
    if not isinstance(spans, list):
        return False
    if not spans:
        return "traceID" in first or "processes" in first
    return isinstance(spans[0], dict) and ("spanID" in spans[0] or "spanId" in spans[0])


def convert(document: object, source: str) -> Iterator[ConvertedSpan | Rejected]:
    """The spans of a Jaeger document (`is_jaeger` true) as OTLP-JSON, one item per span in file order.

    A span that cannot be converted, or a trace entry that is not a trace object, yields `Rejected` with
    a JSON pointer into the file (`<source>#/data/0/spans/3`); the other spans are still converted.
    """
    for pointer, trace in _traces(document) or []:
        spans = trace.get("spans") if isinstance(trace, dict) else None
        if not isinstance(spans, list):
            yield Rejected(f"{source}#{pointer}", "not a Jaeger trace object with a 'spans' list", None)
            continue
        processes = trace.get("processes")
        processes = processes if isinstance(processes, dict) else {}
        batch_process = trace.get("process")
        for index, raw in enumerate(spans):
            where = f"{source}#{pointer}/spans/{index}"
            try:
                yield replace(_convert_span(raw, processes, batch_process), where=where)
            except SpanError as exc:
                yield Rejected(where, str(exc), 1)


def _traces(document: object) -> list[tuple[str, Any]] | None:
    """(JSON pointer, trace object) for each trace of a document, or None when the shape is not Jaeger's."""
    if isinstance(document, list):
        if document and isinstance(document[0], dict) and "spans" in document[0]:
            return [(f"/{index}", trace) for index, trace in enumerate(document)]
        return None
    if not isinstance(document, dict):
        return None
    data = document.get("data")
    if isinstance(data, list):
        return [(f"/data/{index}", trace) for index, trace in enumerate(data)]
    if isinstance(data, dict) and "spans" in data:
        return [("/data", data)]
    if "spans" in document:
        return [("", document)]
    return None


def _convert_span(raw: object, processes: dict, batch_process: object) -> ConvertedSpan:
    if not isinstance(raw, dict):
        raise SpanError("span is not a JSON object")
    domain = "spanId" in raw and "spanID" not in raw
    read_id: Callable[[object, int, str], str] = jaeger_model_id if domain else hex_id
    trace_key, span_key = ("traceId", "spanId") if domain else ("traceID", "spanID")
    trace_id = read_id(raw.get(trace_key), TRACE_ID_HEX_DIGITS, trace_key)
    span_id = read_id(raw.get(span_key), SPAN_ID_HEX_DIGITS, span_key)
    name = raw.get("operationName", "")
    if not isinstance(name, str):
        raise SpanError(f"operationName {name!r} is not a string")
    if "startTime" not in raw:
        raise SpanError("span has no startTime")
    start_ns = _timestamp_ns(raw["startTime"], "startTime")
    end_ns = start_ns + _duration_ns(raw.get("duration", 0), "duration")

    attributes = _tags(raw.get("tags"), "tags")
    kind = span_kind_from_name(str(_plain(attributes.pop("span.kind", string_value(""))))) or SPAN_KIND_UNSPECIFIED
    span: dict[str, Any] = {"traceId": trace_id, "spanId": span_id}
    parent_id, links = _parent_and_links(raw.get("references"), trace_id, read_id, domain)
    if parent_id:
        span["parentSpanId"] = parent_id
    trace_state = attributes.pop("w3c.tracestate", None)
    if trace_state is not None:
        span["traceState"] = str(_plain(trace_state))
    span.update(name=name, kind=kind, startTimeUnixNano=str(start_ns), endTimeUnixNano=str(end_ns))
    scope = pop_scope(attributes, lambda value: str(_plain(value)))
    status = _status(attributes, kind)
    if attributes:
        span["attributes"] = attribute_list(attributes)
    events = _events(raw.get("logs"))
    if events:
        span["events"] = events
    if links:
        span["links"] = links
    if status:
        span["status"] = status
    return ConvertedSpan(resource=_resource(raw, processes, batch_process), scope=scope, span=span)


def _timestamp_ns(value: object, field: str) -> int:
    """Jaeger UI µs integers, or the domain model's RFC 3339 strings, as ns."""
    if isinstance(value, str) and not value.isdigit():
        return rfc3339_to_nanos(value, field)
    return micros_to_nanos(value, field)


def _duration_ns(value: object, field: str) -> int:
    """Jaeger UI µs integers, or the domain model's Go duration strings (`5000ns`), as ns."""
    if isinstance(value, str) and not value.isdigit():
        return go_duration_to_nanos(value, field)
    return micros_to_nanos(value, field)


def _tags(tags: object, field: str) -> dict[str, dict]:
    """Jaeger tags (or log fields) as key → OTLP AnyValue; a repeated key keeps its last value."""
    if tags is None:
        return {}
    if not isinstance(tags, list):
        raise SpanError(f"{field} is not a list")
    attributes: dict[str, dict] = {}
    for index, tag in enumerate(tags):
        where = f"{field}[{index}]"
        if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
            raise SpanError(f"{where} is not a tag object with a string 'key'")
        attributes[tag["key"]] = _tag_value(tag, where)
    return attributes


def _tag_value(tag: dict, where: str) -> dict:
    """A typed Jaeger tag value as OTLP AnyValue: string/bool/int64/float64/binary.

    UI form `{"type": "int64", "value": ...}` (values may be quoted: `"9223372036854775222"`, `"true"`);
    domain form `{"vType": "INT64", "vInt64": ...}`, where protobuf JSON omits the default `STRING` type
    and zero values.
    """
    if "type" in tag:
        value_type, value = str(tag["type"]).upper(), tag.get("value")
    else:
        value_type = str(tag.get("vType", "STRING")).upper()
        if value_type not in _DOMAIN_VALUE_FIELDS:
            raise SpanError(f"{where} has unknown vType {value_type!r}")
        value_field, default = _DOMAIN_VALUE_FIELDS[value_type]
        value = tag.get(value_field, default)
    key = tag["key"]
    match value_type:
        case "BOOL":
            if isinstance(value, str) and value.lower() in ("true", "false"):
                value = value.lower() == "true"
            if not isinstance(value, bool):
                raise SpanError(f"{where} ({key}) bool value {value!r} is not true/false")
            return {"boolValue": value}
        case "INT64":
            try:
                return int_value(_integer(value))
            except ValueError:
                raise SpanError(f"{where} ({key}) int64 value {value!r} is not a 64-bit integer") from None
        case "FLOAT64":
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise SpanError(f"{where} ({key}) float64 value {value!r} is not a number")
            try:
                return {"doubleValue": float(value)}
            except ValueError:
                raise SpanError(f"{where} ({key}) float64 value {value!r} is not a number") from None
        case "BINARY":
            try:
                raw = base64.b64decode(str(value), validate=True)
            # binascii.Error for bad base64; a plain ValueError for text that is not ASCII at all.
            except ValueError:
                raise SpanError(f"{where} ({key}) binary value {value!r} is not base64") from None
            return {"bytesValue": base64.b64encode(raw).decode("ascii")}
        case _:
            # An unknown type keeps its text rather than losing the tag.
            return string_value(value if isinstance(value, str) else str(value))


def _integer(value: object) -> int:
    """An int64 tag value, which Jaeger writers give as a JSON number or a decimal string.

    Raises ValueError for anything else (bools and fractional numbers included).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return int(value)
    raise ValueError(f"{value!r} is not an integer")


def _plain(value: dict) -> object:
    """The Python value inside an OTLP AnyValue built by this module."""
    return next(iter(value.values()))


def _resource(raw: dict, processes: dict, batch_process: object) -> dict:
    """The OTLP resource of a span's process: its own `process`, else `processes[processID]`, else the
    batch's `process`."""
    process = raw.get("process")
    if process is None and "processID" in raw:
        process_id = raw["processID"]
        process = processes.get(process_id) if isinstance(process_id, str) else None
        if process is None:
            raise SpanError(f"processID {process_id!r} is not in the trace's processes")
    if process is None:
        process = batch_process
    if process is None:
        process = {}
    if not isinstance(process, dict):
        raise SpanError("process is not a JSON object")
    service = process.get("serviceName") or UNKNOWN_SERVICE
    attributes = {SERVICE_NAME: string_value(str(service))}
    attributes.update(_tags(process.get("tags"), "process.tags"))
    if "hostname" in attributes and "host.name" not in attributes:
        attributes["host.name"] = attributes.pop("hostname")
    if "jaeger.version" in attributes and "opencensus.exporterversion" not in attributes:
        version = _plain(attributes.pop("jaeger.version"))
        attributes["opencensus.exporterversion"] = string_value(f"Jaeger-{version}")
    return {"attributes": attribute_list(attributes)}


def _status(attributes: dict[str, dict], kind: int) -> dict:
    """The OTLP status (`{}` when unset) from the error, otel.status_* and http status tags, removing the
    tags the collector's translator removes."""
    if attributes.get("error") == {"boolValue": True}:
        # The error tag is the last word on a Jaeger span's error state, whatever otel.status_code says.
        del attributes["error"]
        attributes.pop("otel.status_code", None)
        description = attributes.pop("otel.status_description", None) or attributes.get("http.status_message")
        return _status_value(STATUS_CODE_ERROR, description)
    status_code = attributes.pop("otel.status_code", None)
    if status_code is not None:
        code = status_code_from_name(str(_plain(status_code))) or STATUS_CODE_UNSET
        return _status_value(code, attributes.pop("otel.status_description", None))
    if "http.status_code" in attributes:
        code = _http_status(attributes["http.status_code"], kind)
        return _status_value(code, attributes.get("http.status_message") if code != STATUS_CODE_UNSET else None)
    return {}


def _status_value(code: int, message: dict | None) -> dict:
    """An OTLP-JSON Status, leaving out an unset code and an empty message."""
    return status_value(code, str(_plain(message)) if message and _plain(message) else "")


def _http_status(value: dict, kind: int) -> int:
    """OTLP status for an HTTP status code tag: 4xx is an error for a client span only, 5xx always
    (OpenTelemetry HTTP semantic conventions); a non-numeric value leaves the status unset."""
    try:
        http_code = int(str(_plain(value)))
    except ValueError:
        return STATUS_CODE_UNSET
    if 400 <= http_code < 500:
        return STATUS_CODE_ERROR if kind != SPAN_KIND_SERVER else STATUS_CODE_UNSET
    return STATUS_CODE_UNSET if 100 <= http_code < 400 else STATUS_CODE_ERROR


def _parent_and_links(
    references: object, trace_id: str, read_id: Callable[[object, int, str], str], domain: bool
) -> tuple[str, list[dict]]:
    """The parent span ID ("" for a root) and the OTLP links of a span's references."""
    if references is None:
        return "", []
    if not isinstance(references, list):
        raise SpanError("references is not a list")
    trace_key, span_key = ("traceId", "spanId") if domain else ("traceID", "spanID")
    parsed: list[tuple[str, str, str]] = []
    for index, ref in enumerate(references):
        where = f"references[{index}]"
        if not isinstance(ref, dict):
            raise SpanError(f"{where} is not a JSON object")
        # protobuf JSON omits the default enum value, CHILD_OF.
        ref_type = _REF_TYPES.get(str(ref.get("refType", "CHILD_OF")).upper())
        if ref_type is None:
            raise SpanError(f"{where}.refType {ref.get('refType')!r} is not CHILD_OF or FOLLOWS_FROM")
        ref_trace = read_id(ref.get(trace_key, trace_id), TRACE_ID_HEX_DIGITS, f"{where}.{trace_key}")
        ref_span = read_id(ref.get(span_key), SPAN_ID_HEX_DIGITS, f"{where}.{span_key}")
        # Span ID zero is Jaeger's "no span"; such a reference points nowhere.
        if int(ref_span, 16):
            parsed.append((ref_type, ref_trace, ref_span))
    same_trace = [(ref_type, span) for ref_type, ref_trace, span in parsed if ref_trace == trace_id]
    parent = next((span for ref_type, span in same_trace if ref_type == "child_of"), None)
    if parent is None:
        parent = next((span for ref_type, span in same_trace if ref_type == "follows_from"), "")
    links = [
        {
            "traceId": ref_trace,
            "spanId": ref_span,
            "attributes": [{"key": "opentracing.ref_type", "value": string_value(ref_type)}],
        }
        for ref_type, ref_trace, ref_span in parsed
        if not (ref_type == "child_of" and ref_trace == trace_id and ref_span == parent)
    ]
    return parent, links


def _events(logs: object) -> list[dict]:
    """Jaeger logs as OTLP events: timestamp µs (or RFC 3339) → ns, the `event` field as name."""
    if logs is None:
        return []
    if not isinstance(logs, list):
        raise SpanError("logs is not a list")
    events = []
    for index, log in enumerate(logs):
        where = f"logs[{index}]"
        if not isinstance(log, dict) or "timestamp" not in log:
            raise SpanError(f"{where} is not a log object with a timestamp")
        fields = _tags(log.get("fields"), f"{where}.fields")
        name = fields.pop("event", None)
        event: dict[str, Any] = {
            "timeUnixNano": str(_timestamp_ns(log["timestamp"], f"{where}.timestamp")),
            "name": str(_plain(name)) if name is not None else "log",
        }
        if fields:
            event["attributes"] = attribute_list(fields)
        events.append(event)
    return events
