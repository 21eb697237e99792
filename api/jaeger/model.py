"""Jaeger JSON (the query API v1 / Jaeger UI model) from span rows of ``otel_traces``.

Shapes follow Jaeger's UI model (``internal/uimodel``): a trace is ``{traceID, spans, processes, warnings}``; a
span carries ``traceID``/``spanID`` (lowercase hex: 32 and 16 characters, as Hotspan stores them), ``flags``,
``operationName``, ``references``, ``startTime`` and ``duration`` in **microseconds** (ns truncated, as Jaeger
does), typed ``tags``, ``logs``, ``processID`` and ``warnings``; ``processes`` maps ``p1``, ``p2``... to
``{serviceName, tags}``, one per distinct resource, numbered in order of first appearance.

The mapping of an OTLP span is the OpenTelemetry Collector's Jaeger translator's (``traces_to_jaegerproto``):

- tags: ``otel.scope.name``/``otel.scope.version``, then the span attributes, then ``span.kind`` (lowercase;
  none for an unspecified kind), ``otel.status_code`` (``OK``/``ERROR``; none when unset), ``error=true`` for an
  error status (unless the span has an ``error`` attribute of its own), ``otel.status_description`` (the status
  message) and ``w3c.tracestate``;
- references: the parent as ``CHILD_OF`` first, then each link: ``FOLLOWS_FROM``, or ``CHILD_OF`` when the link
  says ``opentracing.ref_type=child_of`` (so a Jaeger trace imported into Hotspan keeps its reference types);
- logs: one per event, ``{timestamp (µs), fields}``, the event name as the field ``event`` first;
- process: ``service.name`` as ``serviceName``, the other resource attributes as tags;
- ``flags`` is 1 (sampled): ``otel_traces`` keeps no flags, and every stored span was sampled.

**Tag types.** ``otel_traces`` stores every attribute value as a string (``collector.attributes``), so the
original type is lost. It is inferred conservatively, accepting only the exact text the exporter writes for a
typed value, so no digit, sign or zero is ever lost or invented:

- ``true`` / ``false`` → ``bool``;
- a canonical decimal integer (``0``, ``-12``; no ``+``, no ``-0``, no leading zero) within int64 → ``int64``; beyond
  JavaScript's safe integers (±(2^53-1)) the value is written as a JSON string, as Jaeger does;
- a canonical finite float (``72.5``, ``1e-07``, ``1e+21``: no trailing fraction zero, no leading zero, and the
  shortest text of the double it denotes) → ``float64``;
- anything else → ``string``. ``binary`` is never inferred (bytes are stored as base64 text, which no rule can
  tell from a string).

So a string attribute whose text is ``200`` or ``true`` comes out typed; its text is unchanged, and a tag
search (which matches stored text) still finds it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from decimal import Decimal
from itertools import groupby
from typing import Any, Generic, Literal, TypeVar

import polars as pl
from pydantic import BaseModel, Field

from units import NS_PER_US

ValueType = Literal["string", "bool", "int64", "float64", "binary"]
JS_MAX_SAFE_INTEGER = 2**53 - 1
SAMPLED_FLAGS = 1

_INT = re.compile(r"0|-?[1-9][0-9]{0,18}")
_FLOAT = re.compile(r"-?(0|[1-9][0-9]*)\.[0-9]*[1-9]|-?[1-9](\.[0-9]*[1-9])?e[+-][0-9]{2,3}")
_KIND_TAGS = {
    "Server": "server",
    "Client": "client",
    "Producer": "producer",
    "Consumer": "consumer",
    "Internal": "internal",
}
_STATUS_TAGS = {"Ok": "OK", "Error": "ERROR"}
SPAN_KIND_NAMES = {**_KIND_TAGS, "Unspecified": ""}
"""Stored span kind → Jaeger's lowercase spelling (``""`` for an unspecified kind, as Jaeger reports it)."""


class JaegerKeyValue(BaseModel):
    key: str
    type: ValueType = Field(description="`string`, `bool`, `int64`, `float64` or `binary`.")
    value: str | bool | int | float = Field(
        description="Typed as `type` says; an int64 beyond ±(2^53-1) is written as a string (JavaScript)."
    )


class JaegerReference(BaseModel):
    refType: Literal["CHILD_OF", "FOLLOWS_FROM"] = Field(description="`CHILD_OF` for the parent, links otherwise.")
    traceID: str
    spanID: str


class JaegerLog(BaseModel):
    timestamp: int = Field(description="µs since the Unix epoch.")
    fields: list[JaegerKeyValue]


class JaegerSpan(BaseModel):
    traceID: str = Field(description="32 lowercase hex characters.")
    spanID: str = Field(description="16 lowercase hex characters.")
    flags: int = Field(description="Always 1 (sampled).")
    operationName: str
    references: list[JaegerReference]
    startTime: int = Field(description="µs since the Unix epoch.")
    duration: int = Field(description="µs.")
    tags: list[JaegerKeyValue]
    logs: list[JaegerLog]
    processID: str = Field(description="Key into the trace's `processes`.")
    warnings: list[str] | None = None


class JaegerProcess(BaseModel):
    serviceName: str
    tags: list[JaegerKeyValue]


class JaegerTrace(BaseModel):
    traceID: str
    spans: list[JaegerSpan]
    processes: dict[str, JaegerProcess]
    warnings: list[str] | None = None


class JaegerOperation(BaseModel):
    name: str
    spanKind: str = Field(description="`server`, `client`, `producer`, `consumer`, `internal`, or empty.")


class JaegerDependency(BaseModel):
    parent: str = Field(description="Calling service.")
    child: str = Field(description="Called service.")
    callCount: int = Field(description="Parent→child span pairs in the window.")


class JaegerStructuredError(BaseModel):
    code: int = Field(description="HTTP status the error stands for.")
    msg: str
    traceID: str | None = Field(default=None, description="The trace a by-ID lookup did not find.")


T = TypeVar("T")


class JaegerEnvelope(BaseModel, Generic[T]):
    """Jaeger API v1's ``structuredResponse``: every answer, success or error, has these five keys."""

    data: T | None
    total: int = Field(default=0, description="Number of items in `data`.")
    limit: int = 0
    offset: int = 0
    errors: list[JaegerStructuredError] | None = None


def operations(pairs: Iterable[tuple[str, str]], span_kind: str | None, unspecified: str = "") -> list[JaegerOperation]:
    """Jaeger operations from the reader's ``(span name, stored kind)`` pairs, optionally only those of
    ``span_kind`` (Jaeger's lowercase spelling; ``unspecified`` selects spans without a kind; an unknown kind
    selects nothing, as in Jaeger). An unspecified kind is reported as the ``unspecified`` argument: empty in
    API v1, ``internal`` in API v3 (as Jaeger's v3 gateway reports a kindless operation)."""
    wanted = (span_kind or "").lower()
    out = []
    for name, kind in pairs:
        jaeger_kind = SPAN_KIND_NAMES.get(kind, "")
        if wanted and wanted != (jaeger_kind or "unspecified"):
            continue
        out.append(JaegerOperation(name=name, spanKind=jaeger_kind or unspecified))
    return out


def typed_value(text: str) -> tuple[ValueType, str | bool | int | float]:
    """Jaeger ``(type, value)`` of a stored attribute string, by the module's conservative rule."""
    if text in ("true", "false"):
        return "bool", text == "true"
    if _INT.fullmatch(text):
        number = int(text)
        if -(2**63) <= number < 2**63:
            return "int64", number if abs(number) <= JS_MAX_SAFE_INTEGER else text
        return "string", text
    if _FLOAT.fullmatch(text) and _is_shortest_double(text):
        return "float64", float(text)
    return "string", text


def key_values(pairs: Iterable[tuple[str, str]]) -> list[JaegerKeyValue]:
    """Typed tags from stored ``(key, string value)`` pairs, order kept."""
    out = []
    for key, text in pairs:
        value_type, value = typed_value(text)
        out.append(JaegerKeyValue(key=key, type=value_type, value=value))
    return out


def map_pairs(cell: Any) -> list[tuple[str, str]]:
    """A ``Map(String, String)`` cell as polars returns it (list of ``{key, value}`` structs, a dict, or None)
    as ``(key, value)`` pairs in stored order."""
    if cell is None:
        return []
    if isinstance(cell, dict):
        return list(cell.items())
    return [(item["key"], item["value"]) for item in cell]


def traces_from_frame(frame: pl.DataFrame) -> list[JaegerTrace]:
    """Jaeger traces from span rows (columns of ``TraceReader.trace``; spans of one trace adjacent), newest
    trace first (by earliest span start), spans in start order within each."""
    return sorted(_traces(frame), key=_trace_start, reverse=True)


def traces_json(frame: pl.DataFrame) -> list[bytes]:
    """:func:`traces_from_frame` with each trace serialized as JSON as soon as it is built (and its objects freed):
    a search's answer of 100k spans in one model holds the GIL for seconds (``api.read_pool.spliced``)."""
    dumped = [(_trace_start(trace), trace.model_dump_json().encode()) for trace in _traces(frame)]
    dumped.sort(key=lambda item: item[0], reverse=True)
    return [body for _, body in dumped]


def _traces(frame: pl.DataFrame) -> Iterator[JaegerTrace]:
    return (_trace(list(rows)) for _, rows in groupby(_rows(frame), key=lambda row: row["trace_id"]))


def _trace_start(trace: JaegerTrace) -> int:
    return min(span.startTime for span in trace.spans)


def _rows(frame: pl.DataFrame) -> Iterator[dict[str, Any]]:
    return frame.sort(["trace_id", "start_time_unix_nano", "span_id"]).iter_rows(named=True)


def _trace(rows: list[dict[str, Any]]) -> JaegerTrace:
    process_ids: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
    processes: dict[str, JaegerProcess] = {}
    spans = []
    for row in rows:
        resource = tuple(pair for pair in map_pairs(row["resource_attributes"]) if pair[0] != "service.name")
        key = (row["service_name"], resource)
        if key not in process_ids:
            process_ids[key] = f"p{len(process_ids) + 1}"
            processes[process_ids[key]] = JaegerProcess(serviceName=row["service_name"], tags=key_values(resource))
        spans.append(_span(row, process_ids[key]))
    return JaegerTrace(traceID=rows[0]["trace_id"], spans=spans, processes=processes)


def _span(row: dict[str, Any], process_id: str) -> JaegerSpan:
    return JaegerSpan(
        traceID=row["trace_id"],
        spanID=row["span_id"],
        flags=SAMPLED_FLAGS,
        operationName=row["name"],
        references=_references(row),
        startTime=row["start_time_unix_nano"] // NS_PER_US,
        duration=row["duration_ns"] // NS_PER_US,
        tags=_tags(row),
        logs=[
            JaegerLog(timestamp=time_ns // NS_PER_US, fields=_event_fields(name, attributes))
            for time_ns, name, attributes in zip(
                row["event_times_unix_nano"], row["event_names"], row["event_attributes"], strict=True
            )
        ],
        processID=process_id,
    )


def _references(row: dict[str, Any]) -> list[JaegerReference]:
    references = []
    if row["parent_span_id"]:
        references.append(JaegerReference(refType="CHILD_OF", traceID=row["trace_id"], spanID=row["parent_span_id"]))
    for trace_id, span_id, attributes in zip(
        row["link_trace_ids"], row["link_span_ids"], row["link_attributes"], strict=True
    ):
        ref_type = "CHILD_OF" if dict(map_pairs(attributes)).get("opentracing.ref_type") == "child_of" else None
        references.append(JaegerReference(refType=ref_type or "FOLLOWS_FROM", traceID=trace_id, spanID=span_id))
    return references


def _tags(row: dict[str, Any]) -> list[JaegerKeyValue]:
    attributes = map_pairs(row["attributes"])
    pairs = [("otel.scope.name", row["scope_name"]), ("otel.scope.version", row["scope_version"])]
    tags = key_values((key, value) for key, value in pairs if value) + key_values(attributes)
    if kind := _KIND_TAGS.get(row["kind"]):
        tags.append(JaegerKeyValue(key="span.kind", type="string", value=kind))
    if status := _STATUS_TAGS.get(row["status_code"]):
        tags.append(JaegerKeyValue(key="otel.status_code", type="string", value=status))
    if status == "ERROR" and not any(key == "error" for key, _ in attributes):
        tags.append(JaegerKeyValue(key="error", type="bool", value=True))
    if row["status_message"]:
        tags.append(JaegerKeyValue(key="otel.status_description", type="string", value=row["status_message"]))
    if row["trace_state"]:
        tags.append(JaegerKeyValue(key="w3c.tracestate", type="string", value=row["trace_state"]))
    return tags


def _event_fields(name: str, attributes: Any) -> list[JaegerKeyValue]:
    head = [JaegerKeyValue(key="event", type="string", value=name)] if name else []
    return head + key_values(map_pairs(attributes))


def _is_shortest_double(text: str) -> bool:
    """Whether ``text`` (already float-shaped) is the shortest decimal of the double it denotes, compared by
    value: ``72.5`` is, ``0.1000000000000000055`` (rounds to 0.1) and ``1e-400`` (underflows to 0) are not."""
    return Decimal(text) == Decimal(repr(float(text)))
