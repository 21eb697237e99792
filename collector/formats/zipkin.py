"""Zipkin v2 JSON → OTLP-JSON spans.

Shapes read: the v2 span list `[span, ...]` (what `POST /api/v2/spans` takes and `GET /api/v2/trace/{id}`
returns) and the list of traces `[[span, ...], ...]` of `GET /api/v2/traces`. Zipkin v1 JSON is
recognised only to be refused with a clear message. Times: Zipkin µs in, OTLP **nanoseconds** out.

Before conversion, the file's records are repaired as Zipkin and Jaeger repair them for display:

- records that report one span in pieces are merged into one span as Zipkin's storage and UI merge them
  (rules and the handling of conflicting values in `zipkin_merge`); a span built from several records
  carries `zipkin.merged_records` (their count);
- the server half of a shared span ID (`shared: true`, the client half reported with the same `id`) gets a
  span ID of its own with the client half as parent, as Jaeger's query service does, and the server
  side's children move under it (rules and the ID's derivation in `zipkin_shared`); it carries
  `zipkin.shared=true` and `zipkin.original_span_id` (the ID it was reported under).

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
- annotations → events (value as name), sorted by time and value without exact duplicates, as Zipkin
  keeps them.

Differences, on purpose:

- an `error` tag marks the span ERROR whatever its value, and the value is the status message (unless it
  is empty or `true`), as Zipkin itself reads that tag; the collector only honours `error=true`;
- a span without `timestamp` (or with 0, which Zipkin reads as none) after merging is rejected (the
  collector stores it at the Unix epoch, where it would be lost to retention and distort every time range);
- on CLIENT and PRODUCER spans, where the remote endpoint is the server, its address and port are also
  written as `server.address`/`server.port`, which service graphs key on;
- `shared: true` becomes the attribute `zipkin.shared=true` (on a CLIENT record it is ignored, as Zipkin
  ignores it there);
- a span without a local service gets `service.name=unknown_service` (the OTel SDK's default);
- resource-looking tags stay span attributes (the collector moves semconv resource keys to the resource).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
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
from collector.formats.zipkin_merge import CLIENT, Endpoint, Record, Source, merge_records
from collector.formats.zipkin_shared import split_shared

_SPAN_KINDS = {
    "SERVER": SPAN_KIND_SERVER,
    "CLIENT": SPAN_KIND_CLIENT,
    "PRODUCER": SPAN_KIND_PRODUCER,
    "CONSUMER": SPAN_KIND_CONSUMER,
}
_NOT_A_LIST = object()
"""Marks an item of a list of traces that is not a list."""


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
    """The spans of a Zipkin v2 document (`is_zipkin` true) as OTLP-JSON, after merging the records of each
    span and splitting shared span IDs (module docstring).

    First a `Rejected` for each record that cannot be read, with a JSON pointer into the file (`<source>#/3`,
    or `<source>#/0/3` in a list of traces), in file order; then one item per span in the order of its first
    record: a `ConvertedSpan`, or a `Rejected` (pointing at the span's first record) for a span that has no
    timestamp in any of its records. The other spans are still converted.
    """
    if not isinstance(document, list):
        return
    records: list[Record] = []
    for position, (pointer, raw) in enumerate(_raw_records(document, source)):
        if raw is _NOT_A_LIST:
            yield Rejected(pointer, "not a list of Zipkin spans", None)
            continue
        try:
            records.append(_record(raw, Source(position, pointer)))
        except SpanError as exc:
            yield Rejected(pointer, str(exc), 1)
    for span in split_shared(merge_records(records)):
        if span.start_ns is None:
            yield Rejected(span.sources[0].pointer, _no_timestamp(span), 1)
        else:
            yield replace(_converted(span), where=span.sources[0].pointer)


def _first_span(document: object) -> dict | None:
    if not isinstance(document, list) or not document:
        return None
    first = document[0]
    if isinstance(first, list):
        first = first[0] if first else None
    return first if isinstance(first, dict) else None


def _raw_records(document: list, source: str) -> Iterator[tuple[str, object]]:
    nested = bool(document) and isinstance(document[0], list)
    for trace_index, item in enumerate(document):
        if not nested:
            yield f"{source}#/{trace_index}", item
        elif not isinstance(item, list):
            yield f"{source}#/{trace_index}", _NOT_A_LIST
        else:
            for index, raw in enumerate(item):
                yield f"{source}#/{trace_index}/{index}", raw


def _no_timestamp(span: Record) -> str:
    if len(span.sources) == 1:
        return f"span {span.span_id} has no timestamp, and no other record of it in the file has one"
    others = ", ".join(source.pointer for source in span.sources[1:])
    return f"span {span.span_id} has no timestamp in any of its {len(span.sources)} records (also {others})"


def _record(raw: object, source: Source) -> Record:
    """One Zipkin record validated into a `Record`; SpanError naming the field when it cannot be read."""
    if not isinstance(raw, dict):
        raise SpanError("span is not a JSON object")
    trace_id = hex_id(raw.get("traceId"), TRACE_ID_HEX_DIGITS, "traceId")
    span_id = hex_id(raw.get("id"), SPAN_ID_HEX_DIGITS, "id")
    parent_id = None
    if raw.get("parentId") is not None:
        parent = hex_id(raw["parentId"], SPAN_ID_HEX_DIGITS, "parentId")
        # Zeros mean no parent (Zipkin's Span.Builder reads them so), and so does the span's own ID
        # (the collector's translator).
        if parent != span_id and int(parent, 16):
            parent_id = parent
    name = raw.get("name", "")
    if not isinstance(name, str):
        raise SpanError(f"name {name!r} is not a string")
    kind = raw.get("kind")
    kind = kind.upper() if isinstance(kind, str) and kind.upper() in _SPAN_KINDS else None
    return Record(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        kind=kind,
        name=name or None,
        # Zipkin reads a zero timestamp or duration as none.
        start_ns=micros_to_nanos(raw.get("timestamp", 0), "timestamp") or None,
        duration_ns=micros_to_nanos(raw.get("duration", 0), "duration") or None,
        local=_endpoint(raw, "localEndpoint"),
        remote=_endpoint(raw, "remoteEndpoint"),
        annotations=_annotations(raw.get("annotations")),
        tags=_tags(raw.get("tags")),
        # Zipkin ignores `shared` on a client record: sharing is the server half's.
        shared=raw.get("shared") is True and kind != CLIENT,
        sources=(source,),
    )


def _converted(span: Record) -> ConvertedSpan:
    """The OTLP-JSON span of a record that has a start time."""
    assert span.start_ns is not None
    tags = dict(span.tags)
    otlp: dict[str, Any] = {"traceId": span.trace_id, "spanId": span.span_id}
    if span.parent_id is not None:
        otlp["parentSpanId"] = span.parent_id
    trace_state = tags.pop("w3c.tracestate", None)
    if trace_state is not None:
        otlp["traceState"] = trace_state
    kind = _kind(span.kind, tags)
    end_ns = span.start_ns + (span.duration_ns or 0)
    otlp.update(name=span.name or "", kind=kind, startTimeUnixNano=str(span.start_ns), endTimeUnixNano=str(end_ns))
    scope = pop_scope(tags, str)
    status = _status(tags)
    attributes = {key: string_value(value) for key, value in tags.items()}
    # Tags the instrumentation set explicitly win over what the endpoints imply.
    for key, value in _endpoint_attributes(span.local, span.remote, kind).items():
        attributes.setdefault(key, value)
    if span.shared:
        attributes["zipkin.shared"] = {"boolValue": True}
    if span.original_span_id is not None:
        attributes["zipkin.original_span_id"] = string_value(span.original_span_id)
    if len(span.sources) > 1:
        attributes["zipkin.merged_records"] = int_value(len(span.sources))
    if attributes:
        otlp["attributes"] = attribute_list(attributes)
    if span.annotations:
        otlp["events"] = [{"timeUnixNano": str(time_ns), "name": value} for time_ns, value in span.annotations]
    if status:
        otlp["status"] = status
    service = span.local.service or UNKNOWN_SERVICE
    resource = {"attributes": attribute_list({SERVICE_NAME: string_value(service)})}
    return ConvertedSpan(resource=resource, scope=scope, span=otlp)


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


def _kind(kind: str | None, tags: dict[str, str]) -> int:
    if kind is not None:
        return _SPAN_KINDS[kind]
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


def _endpoint(raw: dict, field: str) -> Endpoint:
    endpoint = raw.get(field)
    if endpoint is None:
        return Endpoint()
    if not isinstance(endpoint, dict):
        raise SpanError(f"{field} is not a JSON object")
    port = endpoint.get("port")
    if port is not None and (not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535):
        raise SpanError(f"{field}.port {port!r} is not a port number")
    service, ipv4, ipv6 = (endpoint.get(key) for key in ("serviceName", "ipv4", "ipv6"))
    return Endpoint(
        service=str(service) if service else None,
        ipv4=str(ipv4) if ipv4 else None,
        ipv6=str(ipv6) if ipv6 else None,
        port=port or None,
    )


def _endpoint_attributes(local: Endpoint, remote: Endpoint, kind: int) -> dict[str, dict]:
    """Attributes for the local and remote endpoints (see the module docstring for the names)."""
    attributes: dict[str, dict] = {}
    for endpoint, prefix in ((local, "network.local"), (remote, "network.peer")):
        address = endpoint.ipv4 or endpoint.ipv6
        if address:
            attributes[f"{prefix}.address"] = string_value(address)
        if endpoint.port:
            attributes[f"{prefix}.port"] = int_value(endpoint.port)
    if remote.service:
        attributes["peer.service"] = string_value(remote.service)
    if kind in (SPAN_KIND_CLIENT, SPAN_KIND_PRODUCER):
        address = remote.ipv4 or remote.ipv6
        if address:
            attributes["server.address"] = string_value(address)
        if remote.port:
            attributes["server.port"] = int_value(remote.port)
    return attributes


def _annotations(annotations: object) -> tuple[tuple[int, str], ...]:
    """Zipkin annotations as (time ns, value), sorted by time then value, exact duplicates dropped."""
    if annotations is None:
        return ()
    if not isinstance(annotations, list):
        raise SpanError("annotations is not a list")
    result = set()
    for index, annotation in enumerate(annotations):
        if not isinstance(annotation, dict) or "timestamp" not in annotation:
            raise SpanError(f"annotations[{index}] is not an annotation with a timestamp")
        time_ns = micros_to_nanos(annotation["timestamp"], f"annotations[{index}].timestamp")
        result.add((time_ns, str(annotation.get("value", ""))))
    return tuple(sorted(result))
