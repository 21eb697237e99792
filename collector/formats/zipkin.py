"""Zipkin v2 JSON → OTLP-JSON spans.

Shapes read: the v2 span list `[span, ...]` (what `POST /api/v2/spans` takes and `GET /api/v2/trace/{id}`
returns) and the list of traces `[[span, ...], ...]` of `GET /api/v2/traces`. Zipkin v1 JSON is
recognised only to be refused with a clear message. Times: Zipkin µs in, OTLP **nanoseconds** out.

Mapping rules, as the OpenTelemetry Collector's Zipkin translator does
(opentelemetry-collector-contrib `pkg/translator/zipkin/zipkinv2/to_translator.go`):

- IDs: hex, a 64-bit `traceId` left-padded to 32 digits; `parentId` equal to `id` means no parent
  (as do zeros, which Zipkin's own Span.Builder reads as no parent);
- `localEndpoint.serviceName` → resource `service.name`, one resource per service;
- `kind` SERVER/CLIENT/PRODUCER/CONSUMER → OTLP kind; without `kind`, a `span.kind=internal` tag gives
  INTERNAL, anything else UNSPECIFIED;
- `timestamp` + `duration` (µs) → start/end ns, a missing duration counting as 0;
- tags (string map) → string attributes; `otel.status_code`/`otel.status_description` → status;
  `otel.scope.*`/`otel.library.*` → scope; `w3c.tracestate` → traceState (all removed from attributes);
- endpoints → attributes, in the collector's semconv-v1 form (feature gate
  `pkg.translator.zipkin.EmitV1NetworkConventions`): local ip/port → `network.local.address`/`.port`,
  remote ip/port → `network.peer.address`/`.port`; the remote service → `peer.service`;
- annotations → events (value as name).

Differences, on purpose:

- an `error` tag marks the span ERROR whatever its value, and the value is the status message (unless it
  is empty or `true`), as Zipkin itself reads that tag; the collector only honours `error=true`;
- a span without `timestamp` is rejected (the collector stores it at the Unix epoch, where it would be
  lost to retention and distort every time range);
- on CLIENT and PRODUCER spans, where the remote endpoint is the server, its address and port are also
  written as `server.address`/`server.port`, which service graphs key on;
- `shared: true` becomes the attribute `zipkin.shared=true`;
- a span without a local service gets `service.name=unknown_service` (the OTel SDK's default);
- resource-looking tags stay span attributes (the collector moves semconv resource keys to the resource).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from collector.formats.ids import SPAN_ID_HEX_DIGITS, TRACE_ID_HEX_DIGITS, hex_id
from collector.formats.otlp import (
    SERVICE_NAME,
    SPAN_KIND_CLIENT,
    SPAN_KIND_CONSUMER,
    SPAN_KIND_INTERNAL,
    SPAN_KIND_PRODUCER,
    SPAN_KIND_SERVER,
    SPAN_KIND_UNSPECIFIED,
    STATUS_CODE_ERROR,
    STATUS_CODE_UNSET,
    UNKNOWN_SERVICE,
    ConvertedSpan,
    attribute_list,
    int_value,
    pop_scope,
    status_code_from_name,
    status_value,
    string_value,
)
from collector.formats.payload import Rejected, SpanError
from collector.formats.times import micros_to_nanos

_SPAN_KINDS = {
    "SERVER": SPAN_KIND_SERVER,
    "CLIENT": SPAN_KIND_CLIENT,
    "PRODUCER": SPAN_KIND_PRODUCER,
    "CONSUMER": SPAN_KIND_CONSUMER,
}


def is_zipkin(document: object) -> bool:
    """Whether a parsed JSON document is a Zipkin v2 span list or list of traces."""
    first = _first_span(document)
    return first is not None and "traceId" in first and "id" in first and not is_zipkin_v1(document)


def is_zipkin_v1(document: object) -> bool:
    """Whether a parsed JSON document looks like Zipkin v1 spans (annotations carry the endpoints,
    tags are `binaryAnnotations`), which this module does not read."""
    first = _first_span(document)
    if first is None or "traceId" not in first:
        return False
    annotations = first.get("annotations")
    v1_annotations = isinstance(annotations, list) and any(
        isinstance(annotation, dict) and "endpoint" in annotation for annotation in annotations
    )
    return "binaryAnnotations" in first or v1_annotations


def convert(document: object, source: str) -> Iterator[ConvertedSpan | Rejected]:
    """The spans of a Zipkin v2 document (`is_zipkin` true) as OTLP-JSON, one item per span in file order.

    A span that cannot be converted yields `Rejected` with a JSON pointer into the file (`<source>#/3`,
    or `<source>#/0/3` in a list of traces); the other spans are still converted.
    """
    if not isinstance(document, list):
        return
    nested = bool(document) and isinstance(document[0], list)
    for trace_index, item in enumerate(document):
        if not nested:
            yield _convert_or_reject(item, f"{source}#/{trace_index}")
        elif not isinstance(item, list):
            yield Rejected(f"{source}#/{trace_index}", "not a list of Zipkin spans", None)
        else:
            for index, raw in enumerate(item):
                yield _convert_or_reject(raw, f"{source}#/{trace_index}/{index}")


def _first_span(document: object) -> dict | None:
    if not isinstance(document, list) or not document:
        return None
    first = document[0]
    if isinstance(first, list):
        first = first[0] if first else None
    return first if isinstance(first, dict) else None


def _convert_or_reject(raw: object, source: str) -> ConvertedSpan | Rejected:
    try:
        return _convert_span(raw)
    except SpanError as exc:
        return Rejected(source, str(exc), 1)


def _convert_span(raw: object) -> ConvertedSpan:
    if not isinstance(raw, dict):
        raise SpanError("span is not a JSON object")
    trace_id = hex_id(raw.get("traceId"), TRACE_ID_HEX_DIGITS, "traceId")
    span_id = hex_id(raw.get("id"), SPAN_ID_HEX_DIGITS, "id")
    if "timestamp" not in raw:
        raise SpanError(f"span {span_id} has no timestamp")
    start_ns = micros_to_nanos(raw["timestamp"], "timestamp")
    end_ns = start_ns + micros_to_nanos(raw.get("duration", 0), "duration")
    name = raw.get("name", "")
    if not isinstance(name, str):
        raise SpanError(f"name {name!r} is not a string")
    tags = _tags(raw.get("tags"))

    span: dict[str, Any] = {"traceId": trace_id, "spanId": span_id}
    parent = raw.get("parentId")
    if parent is not None:
        parent_id = hex_id(parent, SPAN_ID_HEX_DIGITS, "parentId")
        # Zeros mean no parent (Zipkin's Span.Builder reads them so), and so does the span's own ID
        # (the collector's translator).
        if parent_id != span_id and int(parent_id, 16):
            span["parentSpanId"] = parent_id
    trace_state = tags.pop("w3c.tracestate", None)
    if trace_state is not None:
        span["traceState"] = trace_state
    kind = _kind(raw.get("kind"), tags)
    span.update(name=name, kind=kind, startTimeUnixNano=str(start_ns), endTimeUnixNano=str(end_ns))
    scope = pop_scope(tags, str)
    status = _status(tags)
    local = _endpoint(raw, "localEndpoint")
    attributes = {key: string_value(value) for key, value in tags.items()}
    # Tags the instrumentation set explicitly win over what the endpoints imply.
    for key, value in _endpoint_attributes(raw, kind).items():
        attributes.setdefault(key, value)
    if raw.get("shared") is True:
        attributes["zipkin.shared"] = {"boolValue": True}
    if attributes:
        span["attributes"] = attribute_list(attributes)
    events = _events(raw.get("annotations"))
    if events:
        span["events"] = events
    if status:
        span["status"] = status
    service = local.get("serviceName") or UNKNOWN_SERVICE
    resource = {"attributes": attribute_list({SERVICE_NAME: string_value(str(service))})}
    return ConvertedSpan(resource=resource, scope=scope, span=span)


def _tags(tags: object) -> dict[str, str]:
    """Zipkin tags, a string → string map; other scalars are kept as their JSON text (`true`, `42`)."""
    if tags is None:
        return {}
    if not isinstance(tags, dict):
        raise SpanError("tags is not a JSON object")
    result: dict[str, str] = {}
    for key, value in tags.items():
        if isinstance(value, bool):
            result[key] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            result[key] = str(value)
        else:
            raise SpanError(f"tags[{key!r}] is not a string")
    return result


def _kind(kind: object, tags: dict[str, str]) -> int:
    if isinstance(kind, str) and kind.upper() in _SPAN_KINDS:
        return _SPAN_KINDS[kind.upper()]
    # Without a Zipkin kind, only an explicit span.kind=internal says more than "unspecified".
    return SPAN_KIND_INTERNAL if tags.pop("span.kind", None) == "internal" else SPAN_KIND_UNSPECIFIED


def _status(tags: dict[str, str]) -> dict:
    """The OTLP status (`{}` when unset) from `otel.status_*` and `error` tags, which are removed."""
    code, message = STATUS_CODE_UNSET, ""
    code_name = tags.pop("otel.status_code", None)
    description = tags.pop("otel.status_description", "")
    if code_name is not None:
        code, message = status_code_from_name(code_name) or STATUS_CODE_UNSET, description
    error = tags.pop("error", None)
    if error is not None:
        code = STATUS_CODE_ERROR
        if error not in ("", "true"):
            message = error
    return status_value(code, message)


def _endpoint(raw: dict, field: str) -> dict:
    endpoint = raw.get(field)
    if endpoint is None:
        return {}
    if not isinstance(endpoint, dict):
        raise SpanError(f"{field} is not a JSON object")
    return endpoint


def _endpoint_attributes(raw: dict, kind: int) -> dict[str, dict]:
    """Attributes for the local and remote endpoints (see the module docstring for the names)."""
    attributes: dict[str, dict] = {}
    for field, prefix in (("localEndpoint", "network.local"), ("remoteEndpoint", "network.peer")):
        endpoint = _endpoint(raw, field)
        address = endpoint.get("ipv4") or endpoint.get("ipv6")
        port = endpoint.get("port")
        if address:
            attributes[f"{prefix}.address"] = string_value(str(address))
        if port is not None and (not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535):
            raise SpanError(f"{field}.port {port!r} is not a port number")
        if port:
            attributes[f"{prefix}.port"] = int_value(port)
        if field == "remoteEndpoint":
            if endpoint.get("serviceName"):
                attributes["peer.service"] = string_value(str(endpoint["serviceName"]))
            if kind in (SPAN_KIND_CLIENT, SPAN_KIND_PRODUCER):
                if address:
                    attributes["server.address"] = string_value(str(address))
                if port:
                    attributes["server.port"] = int_value(port)
    return attributes


def _events(annotations: object) -> list[dict]:
    """Zipkin annotations as OTLP events: timestamp µs → ns, value as name."""
    if annotations is None:
        return []
    if not isinstance(annotations, list):
        raise SpanError("annotations is not a list")
    events = []
    for index, annotation in enumerate(annotations):
        if not isinstance(annotation, dict) or "timestamp" not in annotation:
            raise SpanError(f"annotations[{index}] is not an annotation with a timestamp")
        time_ns = micros_to_nanos(annotation["timestamp"], f"annotations[{index}].timestamp")
        events.append({"timeUnixNano": str(time_ns), "name": str(annotation.get("value", ""))})
    return events
