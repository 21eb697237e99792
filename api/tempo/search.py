"""Tempo search parameters in, Tempo's search answer out (grafana/tempo ``pkg/api/http.go`` parameters,
``pkg/tempopb/tempo.proto`` ``SearchResponse``).

Parameters: ``q`` (TraceQL, :mod:`api.tempo.traceql`), ``tags`` (logfmt ``key=value``, Tempo's older tag search:
each pair matches a span or resource attribute; ``service.name`` the service, ``name`` the span name), ``start`` and
``end`` (Unix **seconds**, on span start), ``minDuration`` / ``maxDuration`` (Go durations, on the **whole trace**,
first span start to last span end, as Tempo's), ``limit`` (traces), ``spss`` (spans per span set).

The answer is proto3 JSON: ``{"traces": [{"traceID", "rootServiceName", "rootTraceName", "startTimeUnixNano"
(string, ns), "durationMs" (int), "spanSet", "spanSets"}], "metrics": {...}}``; a span set is ``{"spans":
[{"spanID", "name", "startTimeUnixNano", "durationNanos", "attributes"}], "matched"}``, ``attributes`` (OTLP JSON
``KeyValue``, left out when empty) the fields ``q`` compares that the span has.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import polars as pl

from api.jaeger.model import map_pairs
from api.jaeger.otlp import any_value
from api.tempo.errors import TempoError
from api.tempo.traceql import TraceQLError, fields_of, parse
from query.store import MAX_ATTRIBUTE_FILTERS, Field, QueryTooLarge, TraceQuery, span_condition
from units.durations import DurationError, parse_duration_param

DEFAULT_LIMIT = 20
"""Traces answered when ``limit`` is absent (Tempo's ``default_result_limit``)."""
MAX_LIMIT = 1_000
"""Most traces one search answers; a larger ``limit`` gets this many (Tempo's ``max_result_limit`` rule)."""
DEFAULT_SPSS = 3
"""Spans per span set when ``spss`` is absent (Tempo's default)."""
MAX_SPSS = 100
_NS_PER_S = 1_000_000_000
_MAX_SECONDS = (2**63 - 1) // _NS_PER_S
"""Latest time taken, in Unix seconds: later overflows the int64 ns the store compares with."""
_LOGFMT = re.compile(r'\s*([^\s=]+)=("(?:[^"\\]|\\.)*"|[^\s"]*)')


@dataclass(frozen=True)
class Search:
    """A parsed search: the reader query, whole-trace duration bounds (ns, None open), spans per span set and the
    fields ``q`` compares (shown beside each matched span)."""

    query: TraceQuery
    min_trace_ns: int | None
    max_trace_ns: int | None
    spans_per_set: int
    fields: tuple[Field, ...] = ()

    @property
    def attribute_keys(self) -> tuple[str, ...]:
        """The attribute keys of :attr:`fields`, for :meth:`storage.reader.TraceReader.matched_spans`."""
        return tuple(dict.fromkeys(f.name for f in self.fields if f.scope != "intrinsic"))


def search(
    q: str | None,
    tags: str | None,
    start: str | None,
    end: str | None,
    min_duration: str | None,
    max_duration: str | None,
    limit: str | None,
    spss: str | None,
) -> Search:
    """The :class:`Search` of Tempo's parameters (strings as sent).

    Raises:
        TempoError: 400 naming the parameter, or TraceQL's parse error.
    """
    try:
        span_filter = parse(q) if q else None
        if span_filter is not None:
            span_condition(span_filter)  # compiled here too, so a query too large is a 400, not a failed read
    except (TraceQLError, QueryTooLarge) as exc:
        raise TempoError(400, f"invalid TraceQL query: {exc}") from None
    service, operation, attributes = _tags(tags or "")
    start_ns, end_ns = window_ns(start, end)
    query = TraceQuery(
        service=service,
        operation=operation,
        attributes=attributes,
        start_ns=start_ns,
        end_ns=end_ns,
        span_filter=span_filter,
        limit=min(positive(limit, "limit") or DEFAULT_LIMIT, MAX_LIMIT),
    )
    return Search(
        query,
        _duration(min_duration, "minDuration"),
        _duration(max_duration, "maxDuration"),
        min(positive(spss, "spss") or DEFAULT_SPSS, MAX_SPSS),
        fields_of(span_filter) if span_filter is not None else (),
    )


def window_ns(start: str | None, end: str | None) -> tuple[int | None, int | None]:
    """``(start, end)`` in ns of Unix-second ``start``/``end`` parameters; None for one absent or empty.

    Raises:
        TempoError: 400 for one that is not Unix seconds, or ``end`` before ``start``.
    """
    start_s, end_s = _integer(start, "start"), _integer(end, "end")
    if start_s is not None and end_s is not None and end_s < start_s:
        raise TempoError(400, "invalid start: start must not be after end")
    return (
        start_s * _NS_PER_S if start_s is not None else None,
        end_s * _NS_PER_S if end_s is not None else None,
    )


def _tags(text: str) -> tuple[str | None, str | None, tuple[tuple[str, str], ...]]:
    """``(service, span name, other pairs)`` of a logfmt ``tags`` value."""
    service = operation = None
    pairs: list[tuple[str, str]] = []
    position = 0
    while text[position:].strip():
        match = _LOGFMT.match(text, position)
        if match is None:
            raise TempoError(400, f"invalid tags: expected key=value at character {position + 1}")
        key, value = match.group(1), match.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        if key in ("service.name", "resource.service.name"):
            service = value
        elif key == "name":
            operation = value
        else:
            pairs.append((key.removeprefix("span.").removeprefix("resource."), value))
        position = match.end()
    if len(pairs) > MAX_ATTRIBUTE_FILTERS:
        raise TempoError(400, f"invalid tags: more than {MAX_ATTRIBUTE_FILTERS} pairs")
    return service, operation, tuple(pairs)


def _integer(text: str | None, name: str) -> int | None:
    if text is None or text == "":
        return None
    if not re.fullmatch(r"\d{1,10}", text) or int(text) > _MAX_SECONDS:
        raise TempoError(400, f"invalid {name}: {text[:64]!r} is not Unix seconds")
    return int(text)


def positive(text: str | None, name: str) -> int | None:
    """The positive integer of parameter ``name``; None when absent or empty.

    Raises:
        TempoError: 400 for zero or anything but digits.
    """
    number = _integer(text, name)
    if number == 0:
        raise TempoError(400, f"invalid {name}: must be positive")
    return number


def _duration(text: str | None, name: str) -> int | None:
    try:
        return parse_duration_param(text)
    except DurationError as exc:
        raise TempoError(400, f"invalid {name}: {exc}") from None


def response(summaries: pl.DataFrame, matched: pl.DataFrame | None, fields: tuple[Field, ...] = ()) -> dict[str, Any]:
    """Tempo's ``SearchResponse`` JSON of trace summaries (:data:`storage.reader.SEARCH_COLUMNS`, newest first) and
    their matched spans (:meth:`storage.reader.TraceReader.matched_spans`; None when no trace was found), each with
    the ``attributes`` of ``fields`` it has (:func:`matched_attributes`). ``spanSet`` repeats the first of
    ``spanSets``, as Tempo writes it (Grafana reads either)."""
    sets: dict[str, dict[str, Any]] = {}
    for row in matched.iter_rows(named=True) if matched is not None else ():
        entry = sets.setdefault(row["trace_id"], {"spans": [], "matched": int(row["matched"])})
        span = {
            "spanID": row["span_id"],
            "name": row["name"],
            "startTimeUnixNano": str(row["start_time_unix_nano"]),
            "durationNanos": str(row["duration_ns"]),
        }
        attributes = matched_attributes(row, fields)
        entry["spans"].append({**span, "attributes": attributes} if attributes else span)
    traces = []
    for row in summaries.sort("start_time_unix_nano", descending=True).iter_rows(named=True):
        trace: dict[str, Any] = {
            "traceID": row["trace_id"],
            "rootServiceName": row["root_service"],
            "rootTraceName": row["root_name"],
            "startTimeUnixNano": str(row["start_time_unix_nano"]),
            "durationMs": int(row["duration_ns"]) // 1_000_000,
        }
        if row["trace_id"] in sets:
            trace["spanSet"] = sets[row["trace_id"]]
            trace["spanSets"] = [sets[row["trace_id"]]]
        traces.append(trace)
    return {"traces": traces, "metrics": {"inspectedTraces": len(traces), "completedJobs": 1, "totalJobs": 1}}


def matched_attributes(row: dict[str, Any], fields: tuple[Field, ...]) -> list[dict[str, Any]]:
    """OTLP JSON ``KeyValue`` list of the ``fields`` a matched span has, as Tempo shows the attributes a query
    compares beside each span (its API docs' search example: ``{ status = error }`` gives ``status``): an attribute
    by its key (``.key`` the span's, else the resource's; ``service.name`` the span's service), ``status`` and
    ``kind`` as lowercase strings; ``name`` and ``duration`` are the span's own fields already."""
    span = dict(map_pairs(row["span_attributes"]))
    resource = dict(map_pairs(row["resource_attributes"]))
    resource["service.name"] = row["service"]
    found: dict[str, dict[str, Any]] = {}
    for field in fields:
        if field.scope == "intrinsic":
            if field.name in ("status", "kind"):
                found[field.name] = {"stringValue": row[field.name]}
            continue
        sources = {"span": (span,), "resource": (resource,), "any": (span, resource)}[field.scope]
        value = next((source[field.name] for source in sources if field.name in source), None)
        if value is not None and field.name not in found:
            found[field.name] = any_value(value)
    return [{"key": key, "value": value} for key, value in found.items()]
