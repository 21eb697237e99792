"""OTLP JSON (``TracesData``) from span rows of ``otel_traces``, as Jaeger API v3 answers.

The encoding is OTLP/JSON's (and Jaeger's, which writes pdata JSON): lowerCamelCase keys, trace and span IDs
as lowercase hex, times as decimal strings of **nanoseconds** since the Unix epoch, ``kind`` and
``status.code`` as enum integers, int64 attribute values as strings; empty optional fields are left out.

Spans are grouped into one ``resourceSpans`` entry per distinct resource (service name plus resource
attributes, ``service.name`` written first when the stored map lacks it) and one ``scopeSpans`` entry per
instrumentation scope (name, version). Attribute values are typed by :func:`api.jaeger.model.typed_value`
(stored strings; see that module for the rule).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import groupby
from typing import Any

import polars as pl
from pydantic_core import to_json

from api.jaeger.model import map_pairs, typed_value
from query.store import SPAN_KINDS, STATUS_CODES

_KIND_NUMBERS = {name: number for number, name in enumerate(SPAN_KINDS)}
_STATUS_NUMBERS = {name: number for number, name in enumerate(STATUS_CODES)}
_Resource = tuple[str, tuple[tuple[str, str], ...]]
"""A ``resourceSpans`` entry's identity within a trace: service name and resource attributes."""


def traces_data(frame: pl.DataFrame) -> dict[str, Any]:
    """``{"resourceSpans": [...]}`` holding every span of ``frame`` (columns of ``TraceReader.trace``).

    As in Jaeger, which concatenates the traces it found, a ``resourceSpans`` entry never mixes traces: the
    entries come trace by trace (newest trace first, by earliest span start), and within a trace one per
    resource, one ``scopeSpans`` per scope, spans in start order. (Grafana's v3 client reads each entry as part
    of one trace.)
    """
    ordered = sorted(_traces(frame), key=lambda trace: trace[0], reverse=True)
    return {"resourceSpans": [entry for _, entries in ordered for entry in entries]}


def resource_spans_json(frame: pl.DataFrame) -> list[bytes]:
    """The ``resourceSpans`` entries of :func:`traces_data`, each serialized as JSON as soon as its trace is built
    (and its objects freed): one dict of 100k spans serialized whole holds the GIL for seconds
    (``api.read_pool.spliced``)."""
    dumped = [(start, [to_json(entry) for entry in entries]) for start, entries in _traces(frame)]
    dumped.sort(key=lambda trace: trace[0], reverse=True)
    return [body for _, entries in dumped for body in entries]


def _traces(frame: pl.DataFrame) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """Per trace of ``frame`` (in trace ID order): its earliest span start (ns) and its ``resourceSpans`` entries."""
    rows = frame.sort(["trace_id", "start_time_unix_nano", "span_id"]).iter_rows(named=True)
    for _, trace_rows in groupby(rows, key=lambda row: row["trace_id"]):
        resources: dict[_Resource, dict[tuple[str, str], list[dict[str, Any]]]] = {}
        start = None
        for row in trace_rows:
            start = row["start_time_unix_nano"] if start is None else start
            resource = (row["service_name"], tuple(map_pairs(row["resource_attributes"])))
            scope = (row["scope_name"], row["scope_version"])
            resources.setdefault(resource, {}).setdefault(scope, []).append(_span(row))
        entries = [
            {
                "resource": {"attributes": _resource_attributes(service, pairs)},
                "scopeSpans": [
                    {"scope": _without_empty({"name": name, "version": version}), "spans": spans}
                    for (name, version), spans in scopes.items()
                ],
            }
            for (service, pairs), scopes in resources.items()
        ]
        yield start or 0, entries


def any_value(text: str) -> dict[str, Any]:
    """OTLP JSON ``AnyValue`` of a stored attribute string (int64 as a decimal string, per proto3 JSON)."""
    value_type, value = typed_value(text)
    if value_type == "bool":
        return {"boolValue": value}
    if value_type == "int64":
        return {"intValue": str(value)}
    if value_type == "float64":
        return {"doubleValue": value}
    return {"stringValue": text}


def attributes(pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """OTLP JSON ``KeyValue`` list from stored ``(key, value)`` pairs."""
    return [{"key": key, "value": any_value(value)} for key, value in pairs]


def _resource_attributes(service: str, pairs: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    if any(key == "service.name" for key, _ in pairs):
        return attributes(list(pairs))
    return [{"key": "service.name", "value": {"stringValue": service}}, *attributes(list(pairs))]


def _span(row: dict[str, Any]) -> dict[str, Any]:
    span = {
        "traceId": row["trace_id"],
        "spanId": row["span_id"],
        "traceState": row["trace_state"],
        "parentSpanId": row["parent_span_id"],
        "name": row["name"],
        "kind": _KIND_NUMBERS.get(row["kind"], 0),
        "startTimeUnixNano": str(row["start_time_unix_nano"]),
        "endTimeUnixNano": str(row["end_time_unix_nano"]),
        "attributes": attributes(map_pairs(row["attributes"])),
        "events": [
            _without_empty({"timeUnixNano": str(time_ns), "name": name, "attributes": attributes(map_pairs(attrs))})
            for time_ns, name, attrs in zip(
                row["event_times_unix_nano"], row["event_names"], row["event_attributes"], strict=True
            )
        ],
        "links": [
            _without_empty(
                {
                    "traceId": trace_id,
                    "spanId": span_id,
                    "traceState": state,
                    "attributes": attributes(map_pairs(attrs)),
                }
            )
            for trace_id, span_id, state, attrs in zip(
                row["link_trace_ids"],
                row["link_span_ids"],
                row["link_trace_states"],
                row["link_attributes"],
                strict=True,
            )
        ],
        "status": _without_empty(
            {"code": _STATUS_NUMBERS.get(row["status_code"], 0), "message": row["status_message"]}
        ),
    }
    return _without_empty(span)


def _without_empty(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` less empty strings, empty lists and zero enums, which OTLP JSON writers leave out; an empty
    ``status`` object stays (it is how pdata writes an unset status)."""
    return {key: value for key, value in fields.items() if value not in ("", [], 0) or key == "status"}
