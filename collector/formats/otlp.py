"""OTLP request shapes: building OTLP-JSON values, grouping converted spans into requests, splitting
large requests (JSON and protobuf) into requests of at most N spans.

OTLP-JSON follows the OTLP/JSON encoding of the spec: camelCase keys, hex IDs, enums as ints, int64
(`intValue`, `*UnixNano`) as decimal strings, bytes as base64.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.formats.payload import SpanError
from collector.otlp_json import camel_case_keys, has_snake_case_key

SPAN_KIND_UNSPECIFIED = 0
SPAN_KIND_INTERNAL = 1
SPAN_KIND_SERVER = 2
SPAN_KIND_CLIENT = 3
SPAN_KIND_PRODUCER = 4
SPAN_KIND_CONSUMER = 5

STATUS_CODE_UNSET = 0
STATUS_CODE_OK = 1
STATUS_CODE_ERROR = 2

SERVICE_NAME = "service.name"
UNKNOWN_SERVICE = "unknown_service"
"""The OpenTelemetry resource SDK's default `service.name` when a span names no service."""

_MAX_INT64 = 2**63 - 1
_SCOPE_TAGS = (
    ("name", ("otel.scope.name", "otel.library.name")),
    ("version", ("otel.scope.version", "otel.library.version")),
)

TagValue = TypeVar("TagValue")


def string_value(value: str) -> dict:
    """An OTLP-JSON AnyValue holding a string."""
    return {"stringValue": value}


def int_value(value: int) -> dict:
    """An OTLP-JSON AnyValue holding an int64 (a decimal string, as proto3 JSON writes int64).

    Raises ValueError when `value` does not fit an int64.
    """
    if not -_MAX_INT64 - 1 <= value <= _MAX_INT64:
        raise ValueError(f"{value} does not fit a 64-bit signed integer")
    return {"intValue": str(value)}


def any_value(value: object, field: str) -> dict:
    """An OTLP-JSON AnyValue for a plain JSON value, as the OTel SDKs print attributes: a string, a bool, an
    integer (int64), a float, or an array of those.

    Raises SpanError naming `field` for null, an object, and an integer that does not fit an int64.
    """
    if isinstance(value, str):
        return string_value(value)
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        try:
            return int_value(value)
        except ValueError as error:
            raise SpanError(f"{field}: {error}") from None
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(item, f"{field}/{index}") for index, item in enumerate(value)]}}
    raise SpanError(f"{field} is {value!r}, not a string, number, boolean or array")


def plain_attributes(value: object, field: str) -> dict[str, dict]:
    """Key → OTLP-JSON AnyValue for attributes given as one plain JSON object (`{"http.method": "GET"}`);
    null is no attributes.

    Raises SpanError naming `field` when `value` is not an object or a value cannot be converted.
    """
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpanError(f"{field} {value!r} is not an object")
    return {key: any_value(item, f"{field}.{key}") for key, item in value.items()}


def key_value(key: str, value: dict) -> dict:
    """An OTLP-JSON KeyValue: `key` and an AnyValue."""
    return {"key": key, "value": value}


def attribute_list(attributes: dict[str, dict]) -> list[dict]:
    """OTLP-JSON attributes (a KeyValue list) from a key → AnyValue mapping, in insertion order."""
    return [key_value(key, value) for key, value in attributes.items()]


SPAN_KINDS_BY_NAME = {
    "unspecified": SPAN_KIND_UNSPECIFIED,
    "internal": SPAN_KIND_INTERNAL,
    "server": SPAN_KIND_SERVER,
    "client": SPAN_KIND_CLIENT,
    "producer": SPAN_KIND_PRODUCER,
    "consumer": SPAN_KIND_CONSUMER,
}
"""OTLP span kinds by their name as :func:`span_kind_from_name` normalises it."""


def span_kind_from_name(name: str) -> int | None:
    """The OTLP span kind a writer names: the proto enum (`SPAN_KIND_SERVER`), the Python SDK's `SpanKind.SERVER`,
    Jaeger's `span.kind` tag and tinyagent's `SpanKind` values (`server`), pdata's `Server` as SigNoz stores it;
    any case. None if unknown."""
    bare = name.removeprefix("SpanKind.").upper().removeprefix("SPAN_KIND_")
    return SPAN_KINDS_BY_NAME.get(bare.lower())


def status_code_from_name(name: str) -> int | None:
    """The OTLP status code for an `otel.status_code` tag value: `OK`/`ERROR`/`UNSET` as the OTel
    Jaeger and Zipkin exporters write it, or the enum names `STATUS_CODE_*`; any case. None if unknown."""
    codes = {"UNSET": STATUS_CODE_UNSET, "OK": STATUS_CODE_OK, "ERROR": STATUS_CODE_ERROR}
    return codes.get(name.upper().removeprefix("STATUS_CODE_"))


def status_value(code: int, message: str) -> dict:
    """An OTLP-JSON Status, leaving out an unset code and an empty message (`{}` when both are)."""
    status: dict[str, int | str] = {}
    if code != STATUS_CODE_UNSET:
        status["code"] = code
    if message:
        status["message"] = message
    return status


def pop_scope(tags: dict[str, TagValue], as_text: Callable[[TagValue], str]) -> dict:
    """The OTLP-JSON InstrumentationScope named by `otel.scope.name`/`.version` tags (or the older
    `otel.library.*` ones, which the OTel Jaeger and Zipkin exporters wrote), removed from `tags`."""
    scope: dict[str, str] = {}
    for field, keys in _SCOPE_TAGS:
        for key in keys:
            value = tags.pop(key, None)
            if value is not None and field not in scope:
                scope[field] = as_text(value)
    return scope


@dataclass(frozen=True)
class ConvertedSpan:
    """One span converted to OTLP-JSON, with the resource and instrumentation scope it belongs to.

    `resource` is an OTLP-JSON Resource (`{"attributes": [...]}`), `scope` an InstrumentationScope
    (`{"name": ..., "version": ...}`, empty when unknown), `span` an OTLP-JSON Span, `where` the span's place in
    its file for messages (`<source>#/data/0/spans/3`, a Rejected's source form; empty when unknown).
    """

    resource: dict
    scope: dict
    span: dict
    where: str = ""


def group_converted(spans: Iterable[ConvertedSpan]) -> list[tuple[dict, dict, dict]]:
    """(resourceSpans template, scopeSpans template, span) triples, grouped so that spans of one resource
    and scope are adjacent, groups in order of first appearance. Equal resources (and scopes) share one
    template object, so `chunk_requests` emits one resourceSpans per distinct resource."""
    groups: dict[str, tuple[dict, dict[str, tuple[dict, list[dict]]]]] = {}
    for converted in spans:
        resource_key = json.dumps(converted.resource, sort_keys=True)
        scope_key = json.dumps(converted.scope, sort_keys=True)
        _, scopes = groups.setdefault(resource_key, ({"resource": converted.resource}, {}))
        scopes.setdefault(scope_key, ({"scope": converted.scope}, []))[1].append(converted.span)
    return [
        (resource_template, scope_template, span)
        for resource_template, scopes in groups.values()
        for scope_template, members in scopes.values()
        for span in members
    ]


def request_triples(request: dict) -> list[tuple[dict, dict, dict]] | None:
    """The (resourceSpans template, scopeSpans template, span) triples of an OTLP-JSON request, the
    templates being shallow copies without their `scopeSpans`/`spans`.

    None when the request is not shaped as lists of objects, so it cannot be split and is passed on
    whole for the decoder to judge.
    """
    resource_spans = request.get("resourceSpans")
    if not isinstance(resource_spans, list):
        return None
    triples: list[tuple[dict, dict, dict]] = []
    for resource_span in resource_spans:
        scope_spans = resource_span.get("scopeSpans", []) if isinstance(resource_span, dict) else None
        if not isinstance(scope_spans, list):
            return None
        resource_template = {k: v for k, v in resource_span.items() if k != "scopeSpans"}
        for scope_span in scope_spans:
            spans = scope_span.get("spans", []) if isinstance(scope_span, dict) else None
            if not isinstance(spans, list):
                return None
            scope_template = {k: v for k, v in scope_span.items() if k != "spans"}
            triples.extend((resource_template, scope_template, span) for span in spans)
    return triples


def chunk_requests(triples: Iterable[tuple[dict, dict, dict]], max_spans: int) -> Iterator[tuple[dict, int]]:
    """OTLP-JSON ExportTraceServiceRequests of at most `max_spans` spans each, with their span counts.

    Consecutive triples that share a template object (by identity) share one resourceSpans/scopeSpans
    entry of a request; a template repeats in each request its spans reach.
    """
    resource_spans: list[dict] = []
    count = 0
    last_resource: dict | None = None
    last_scope: dict | None = None
    for resource_template, scope_template, span in triples:
        if count == max_spans:
            yield {"resourceSpans": resource_spans}, count
            resource_spans, count, last_resource, last_scope = [], 0, None, None
        if resource_template is not last_resource:
            resource_spans.append({**resource_template, "scopeSpans": []})
            last_resource, last_scope = resource_template, None
        if scope_template is not last_scope:
            resource_spans[-1]["scopeSpans"].append({**scope_template, "spans": []})
            last_scope = scope_template
        resource_spans[-1]["scopeSpans"][-1]["spans"].append(span)
        count += 1
    if count:
        yield {"resourceSpans": resource_spans}, count


def protobuf_span_count(request: ExportTraceServiceRequest) -> int:
    """The number of spans in a protobuf ExportTraceServiceRequest."""
    return sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)


def chunk_protobuf(request: ExportTraceServiceRequest, max_spans: int) -> Iterator[tuple[bytes, int]]:
    """Serialized ExportTraceServiceRequests of at most `max_spans` spans each, with their span counts;
    resource and scope (with their schema URLs) are copied into each request their spans reach."""
    chunk = ExportTraceServiceRequest()
    count = 0
    for resource_spans in request.resource_spans:
        chunk_resource = None
        for scope_spans in resource_spans.scope_spans:
            chunk_scope = None
            for span in scope_spans.spans:
                if count == max_spans:
                    yield chunk.SerializeToString(), count
                    chunk, count, chunk_resource, chunk_scope = ExportTraceServiceRequest(), 0, None, None
                if chunk_resource is None:
                    chunk_resource = chunk.resource_spans.add()
                    chunk_resource.resource.CopyFrom(resource_spans.resource)
                    chunk_resource.schema_url = resource_spans.schema_url
                if chunk_scope is None:
                    chunk_scope = chunk_resource.scope_spans.add()
                    chunk_scope.scope.CopyFrom(scope_spans.scope)
                    chunk_scope.schema_url = scope_spans.schema_url
                chunk_scope.spans.append(span)
                count += 1
    if count:
        yield chunk.SerializeToString(), count


_REQUEST_KEYS = frozenset({"resourceSpans", "resource_spans", "batches"})
"""Top-level keys of a trace request: OTLP/JSON's, the proto's own field name, Tempo's."""


def traces_request(document: object, text: str | bytes | None = None) -> dict | None:
    """The OTLP-JSON ExportTraceServiceRequest in a parsed JSON document, or None.

    Read as such: an object with `resourceSpans`; Grafana Tempo's trace (`/api/traces/{id}` of Tempo 1.x and
    2.x before the `resourceSpans` name, Grafana's "Download traces" and its documented trace-file example),
    whose resource spans are `batches` (Tempo's `tempopb.Trace`); either of those inside the envelope
    `result` (Jaeger's API v3) or `trace` (Tempo's `/api/v2/traces/{id}`, `tempopb.TraceByIDResponse`).
    Resource spans written with OTLP's names before 0.15 (`instrumentationLibrarySpans` holding
    `instrumentationLibrary`, as Tempo 1.x and Grafana's download write them) are renamed to `scopeSpans` and
    `scope`; fields named as in the proto (`resource_spans`, `trace_id`: protobuf's JSON printers preserving field
    names) are renamed to their lowerCamelCase names (:func:`collector.otlp_json.camel_case_keys`, as the OTLP
    receivers read them); the other fields are untouched. The document itself is returned when nothing needed
    renaming. ``text``: the JSON ``document`` was parsed from, when at hand: without a key with an underscore in it
    (:func:`collector.otlp_json.has_snake_case_key`) the renaming walk is left out.
    """
    if not isinstance(document, dict):
        return None
    for envelope in ("result", "trace"):
        inner = document.get(envelope)
        if isinstance(inner, dict) and not _REQUEST_KEYS.isdisjoint(inner):
            return traces_request(inner, text)
    if _REQUEST_KEYS.isdisjoint(document):
        return None
    if text is None or has_snake_case_key(text):
        document = camel_case_keys(document)
    if "resourceSpans" in document:
        resource_spans = document["resourceSpans"]
    elif isinstance(document.get("batches"), list):
        resource_spans = document["batches"]
    else:
        return None
    if isinstance(resource_spans, list) and any(_legacy(entry) for entry in resource_spans):
        resource_spans = [_renamed(entry) if _legacy(entry) else entry for entry in resource_spans]
    if resource_spans is document.get("resourceSpans"):
        return document
    return {"resourceSpans": resource_spans}


def _legacy(resource_spans: object) -> bool:
    return (
        isinstance(resource_spans, dict)
        and "instrumentationLibrarySpans" in resource_spans
        and "scopeSpans" not in resource_spans
    )


def _renamed(resource_spans: dict) -> dict:
    """Resource spans in OTLP's pre-0.15 names, renamed: `instrumentationLibrarySpans` → `scopeSpans`, each
    entry's `instrumentationLibrary` → `scope`."""
    renamed = {key: value for key, value in resource_spans.items() if key != "instrumentationLibrarySpans"}
    scopes = resource_spans["instrumentationLibrarySpans"]
    if isinstance(scopes, list):
        scopes = [
            {("scope" if key == "instrumentationLibrary" else key): value for key, value in scope.items()}
            if isinstance(scope, dict)
            else scope
            for scope in scopes
        ]
    renamed["scopeSpans"] = scopes
    return renamed
