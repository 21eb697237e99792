"""Query parameters of the Jaeger APIs → :class:`storage.reader.TraceQuery`, with Jaeger's rules and messages.

Units: API v1 takes ``start``/``end`` in **µs** since the Unix epoch, ``endTs``/``lookback`` of
``/api/dependencies`` in **ms**, durations as Go duration strings; API v3 takes RFC 3339 timestamps (up to ns
digits) and Go durations. Everything is converted to **ns** for the reader. Every failure raises
:class:`~api.jaeger.errors.JaegerError` (400) naming the parameter; nothing unparsed reaches SQL, and values are
clamped to what ``DateTime64(9)`` holds, so no input makes the store fail.

Tags and attributes are matched as stored text against span or resource attributes, except the tags Jaeger
derives from OTLP fields (:mod:`api.jaeger.model`), which Hotspan keeps in columns: ``error=true`` and
``otel.status_code=OK|ERROR`` filter on the span status, ``span.kind=server|client|...`` on the span kind.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from api.jaeger.errors import JaegerError
from api.window import MAX_NS
from query.store import MAX_ATTRIBUTE_FILTERS, TraceQuery
from units import NS_PER_MS, NS_PER_US
from units.durations import DurationError, parse_duration_param

DEFAULT_LIMIT = 100
"""Traces a search returns when the client sets no limit (Jaeger's default)."""
MAX_LIMIT = 2**31 - 1
"""Largest limit accepted (Jaeger parses it as int32); a search returns at most :data:`MAX_TRACES` traces."""
MAX_TRACES = 1_000
"""Most traces one search returns, whatever its ``limit`` (v1) or ``query.searchDepth`` (v3) asks: a larger value is
answered with this many (as Jaeger's UI caps its own field), and their spans within ``HOTSPAN_MAX_SEARCH_SPANS``
(else 413, ``api.read_pool``)."""
DEFAULT_TRACE_LOOKBACK_NS = 2 * 24 * 3600 * 10**9
"""Search window when ``start`` is absent: two days before ``end`` (Jaeger's default)."""
DEFAULT_DEPENDENCY_LOOKBACK_MS = 24 * 3600 * 1000
"""``/api/dependencies`` window when ``lookback`` is absent: one day (Jaeger's default)."""

_SPAN_KINDS = {"server", "client", "producer", "consumer", "internal", "unspecified"}
_RFC3339 = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[Tt](?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.(?P<frac>[0-9]{1,9}))?"
    r"(?P<zone>[Zz]|[+\- ][0-9]{2}:[0-9]{2})"
)
_UI_LOOKBACK = re.compile(r"([1-9][0-9]{0,5})([dw])")
_GO_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_GO_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class SearchFilters:
    """What both APIs' trace searches share, already parsed. Times and durations in ns."""

    service: str | None
    operation: str | None
    start_ns: int
    end_ns: int
    min_duration_ns: int | None
    max_duration_ns: int | None
    tags: Mapping[str, str]
    limit: int

    def to_query(self) -> TraceQuery:
        """The reader's query; Jaeger's derived tags become status and kind filters.

        Raises:
            JaegerError: 400, more than :data:`storage.reader.MAX_ATTRIBUTE_FILTERS` tags.
        """
        if len(self.tags) > MAX_ATTRIBUTE_FILTERS:
            raise JaegerError(400, f"too many tags: {len(self.tags)} (at most {MAX_ATTRIBUTE_FILTERS})")
        attributes: list[tuple[str, str]] = []
        status_code = span_kind = None
        for key, value in self.tags.items():
            if key == "error" and value == "true":
                status_code = "Error"
            elif key == "otel.status_code" and value.upper() in ("OK", "ERROR"):
                status_code = value.capitalize()
            elif key == "span.kind" and value.lower() in _SPAN_KINDS:
                span_kind = value.capitalize()
            else:
                attributes.append((key, value))
        return TraceQuery(
            service=self.service,
            operation=self.operation,
            start_ns=self.start_ns,
            end_ns=self.end_ns,
            min_duration_ns=self.min_duration_ns,
            max_duration_ns=self.max_duration_ns,
            attributes=tuple(attributes),
            status_code=status_code,
            span_kind=span_kind,
            limit=min(self.limit, MAX_TRACES),
        )


def now_ns() -> int:
    """Wall clock, ns since the Unix epoch."""
    return time.time_ns()


def clamp_ns(value: int) -> int:
    """``value`` (ns) within ``[0, MAX_NS]``: a window reaching past what the store can hold is open there."""
    return max(0, min(value, MAX_NS))


def duration_param(text: str | None, name: str) -> int | None:
    """A non-negative Go duration parameter as ns; ``None`` or empty when absent.

    Raises:
        JaegerError: 400, not a Go duration or negative.
    """
    try:
        return parse_duration_param(text)
    except DurationError as exc:
        raise JaegerError(400, f"unable to parse param '{name}': {exc}") from None


def limit_param(value: int | None, name: str) -> int:
    """A trace limit: :data:`DEFAULT_LIMIT` when absent; 1 to :data:`MAX_LIMIT` otherwise.

    Raises:
        JaegerError: 400, out of range.
    """
    if value is None:
        return DEFAULT_LIMIT
    if not 0 < value <= MAX_LIMIT:
        raise JaegerError(400, f"invalid parameter: {name} must be between 1 and {MAX_LIMIT}, got {value}")
    return value


def v1_tags(simple: Iterable[str], json_maps: Iterable[str]) -> dict[str, str]:
    """Jaeger v1 tag filters: each ``tag=key:value`` (the value may hold colons), then each ``tags`` JSON
    object of strings (later keys win).

    Raises:
        JaegerError: 400, a ``tag`` without ``:`` or a ``tags`` value that is not a JSON object of strings.
    """
    tags: dict[str, str] = {}
    for item in simple:
        key, sep, value = item.partition(":")
        if not sep:
            raise JaegerError(400, f"malformed 'tag' parameter, expecting key:value, received: {item}")
        tags[key] = value
    for text in json_maps:
        tags.update(json_string_map(text, "tags"))
    return tags


def json_string_map(text: str, name: str) -> dict[str, str]:
    """A JSON object whose values are all strings (Jaeger's ``map[string]string``).

    Raises:
        JaegerError: 400, anything else.
    """
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise JaegerError(400, f"malformed '{name}' parameter, cannot unmarshal JSON: {exc}") from None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise JaegerError(400, f"malformed '{name}' parameter, cannot unmarshal JSON: expected an object of strings")
    return value


def v1_window(start_us: int | None, end_us: int | None, lookback: str | None) -> tuple[int, int]:
    """The v1 search window in ns: ``end`` defaults to now; ``start`` to ``end - lookback`` when ``lookback`` is
    a Go duration or Jaeger UI's ``<n>d``/``<n>w`` (``custom``, as Grafana sends, means "use start/end"), else to
    two days before ``end``. Jaeger's server ignores ``lookback``; honouring it only without ``start`` keeps
    every request Jaeger answers answered the same way.

    Raises:
        JaegerError: 400, a malformed ``lookback`` or ``start`` after ``end``.
    """
    end_ns = clamp_ns(end_us * NS_PER_US) if end_us is not None else now_ns()
    if start_us is not None:
        start_ns = clamp_ns(start_us * NS_PER_US)
    elif lookback and lookback != "custom":
        start_ns = clamp_ns(end_ns - _lookback_ns(lookback))
    else:
        start_ns = clamp_ns(end_ns - DEFAULT_TRACE_LOOKBACK_NS)
    if start_ns > end_ns:
        raise JaegerError(400, "invalid parameter: start time must be before end time")
    return start_ns, end_ns


def _lookback_ns(text: str) -> int:
    if match := _UI_LOOKBACK.fullmatch(text):
        days = int(match[1]) * (7 if match[2] == "w" else 1)
        return days * 24 * 3600 * 10**9
    return duration_param(text, "lookback") or 0


def check_durations(min_ns: int | None, max_ns: int | None, min_name: str, max_name: str) -> None:
    """Raises JaegerError 400 when both bounds are set and the maximum is below the minimum."""
    if min_ns and max_ns and max_ns < min_ns:
        raise JaegerError(400, f"'{max_name}' should be greater than '{min_name}'")


def dependency_window(end_ts_ms: int | None, lookback_ms: int | None) -> tuple[int, int]:
    """``/api/dependencies`` window in ns from ``endTs`` (ms since epoch, default now) and ``lookback``
    (ms, default one day).

    Raises:
        JaegerError: 400, a negative ``lookback``.
    """
    if lookback_ms is not None and lookback_ms < 0:
        raise JaegerError(400, f"unable to parse param 'lookback': must not be negative, got {lookback_ms}")
    end_ns = clamp_ns(end_ts_ms * NS_PER_MS) if end_ts_ms is not None else now_ns()
    lookback = DEFAULT_DEPENDENCY_LOOKBACK_MS if lookback_ms is None else lookback_ms
    return clamp_ns(end_ns - lookback * NS_PER_MS), end_ns


def rfc3339_ns(text: str, name: str) -> int:
    """An RFC 3339 timestamp with up to nanosecond digits (Go's ``time.RFC3339Nano``) as ns since the epoch,
    clamped by :func:`clamp_ns`. A space before the zone offset is read as ``+``: clients (Grafana among them)
    put the timestamp into the query string unencoded, and form decoding turns its ``+`` into a space.

    Raises:
        JaegerError: 400, naming ``name``.
    """
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise JaegerError(400, f"malformed parameter {name}: {text!r} is not an RFC 3339 timestamp")
    zone = match["zone"].upper().replace("Z", "+00:00").replace(" ", "+")
    try:
        whole = datetime.fromisoformat(f"{match['date']}T{match['time']}{zone}")
    except ValueError as exc:
        raise JaegerError(400, f"malformed parameter {name}: {exc}") from None
    seconds = (whole - _EPOCH) // timedelta(seconds=1)
    return clamp_ns(seconds * 10**9 + int((match["frac"] or "0").ljust(9, "0")))


def go_bool(text: str, name: str) -> bool:
    """A boolean as Go's ``strconv.ParseBool`` reads it.

    Raises:
        JaegerError: 400, naming ``name``.
    """
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    raise JaegerError(400, f"malformed parameter {name}: {text!r} is not a boolean")


def v1_search(
    *,
    service: str | None,
    operation: str | None,
    tag: Iterable[str],
    tags: Iterable[str],
    start_us: int | None,
    end_us: int | None,
    lookback: str | None,
    min_duration: str | None,
    max_duration: str | None,
    limit: int | None,
) -> TraceQuery:
    """The reader query of a v1 ``/api/traces`` search (parameters as received; µs times, Go durations).

    Raises:
        JaegerError: 400, Jaeger's rules: ``service`` is required, limit 1..2^31-1, ``start`` <= ``end``,
            ``maxDuration`` >= ``minDuration``, well-formed tags and durations.
    """
    if not service:
        raise JaegerError(400, "parameter 'service' is required")
    start_ns, end_ns = v1_window(start_us, end_us, lookback)
    min_ns = duration_param(min_duration, "minDuration")
    max_ns = duration_param(max_duration, "maxDuration")
    check_durations(min_ns, max_ns, "minDuration", "maxDuration")
    return SearchFilters(
        service=service,
        operation=operation or None,
        start_ns=start_ns,
        end_ns=end_ns,
        min_duration_ns=min_ns,
        max_duration_ns=max_ns,
        tags=v1_tags(tag, tags),
        limit=limit_param(limit, "limit"),
    ).to_query()


@dataclass(frozen=True)
class Named:
    """A parameter value with the name it arrived under (Jaeger v3 takes camelCase names and older
    snake_case aliases; errors name the one the client used)."""

    value: str | None
    name: str


def pick(*candidates: Named) -> Named:
    """The first candidate with a non-empty value (canonical name first), else the first, empty."""
    return next((c for c in candidates if c.value), candidates[0])


def v3_search(
    *,
    service: Named,
    operation: Named,
    attributes: Named,
    start_min: Named,
    start_max: Named,
    duration_min: Named,
    duration_max: Named,
    search_depth: Named,
    raw_traces: Named,
    filter_expression: Named,
) -> TraceQuery:
    """The reader query of a v3 ``/api/v3/traces`` search. ``query.startTimeMax`` is exclusive, as the API says.

    Raises:
        JaegerError: 400: both time bounds are required (RFC 3339), durations are Go durations, the search depth
            a positive integer, attributes a JSON object of strings; ``query.filter`` (Jaeger's experimental
            expression filter) is refused rather than ignored, since ignoring it would widen the result.
    """
    if filter_expression.value:
        raise JaegerError(400, f"malformed parameter {filter_expression.name}: structured filters are not supported")
    if not start_min.value or not start_max.value:
        raise JaegerError(400, f"{start_min.name} and {start_max.name} are required")
    if raw_traces.value:
        go_bool(raw_traces.value, raw_traces.name)
    min_ns = duration_param(duration_min.value, duration_min.name)
    max_ns = duration_param(duration_max.value, duration_max.name)
    check_durations(min_ns, max_ns, duration_min.name, duration_max.name)
    start_ns = rfc3339_ns(start_min.value, start_min.name)
    end_ns = rfc3339_ns(start_max.value, start_max.name) - 1
    if start_ns > end_ns:
        raise JaegerError(400, f"invalid parameter: {start_min.name} must be before {start_max.name}")
    return SearchFilters(
        service=service.value or None,
        operation=operation.value or None,
        start_ns=start_ns,
        end_ns=end_ns,
        min_duration_ns=min_ns,
        max_duration_ns=max_ns,
        tags=json_string_map(attributes.value, attributes.name) if attributes.value else {},
        limit=_search_depth(search_depth),
    ).to_query()


def _search_depth(depth: Named) -> int:
    if not depth.value:
        return DEFAULT_LIMIT
    if not depth.value.isascii() or not depth.value.isdigit() or len(depth.value) > 10:
        raise JaegerError(400, f"malformed parameter {depth.name}: {depth.value!r} is not a 32-bit whole number")
    return DEFAULT_LIMIT if int(depth.value) == 0 else limit_param(int(depth.value), depth.name)
