"""Turning what a user typed into a :class:`storage.reader.TraceQuery` or a trace ID, with messages that
say what to fix. Pure functions, so the search page's callbacks only wire components to them."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from urllib.parse import urlencode

from analysis import STAGES
from dashboards.format import shorten
from query import store
from query.store import TraceQuery
from query.trace_search import SORTS, TraceSearch
from units import NS_PER_S

LOOKBACKS: dict[str, tuple[str, int | None]] = {
    "15m": ("Last 15 minutes", 15 * 60 * NS_PER_S),
    "1h": ("Last hour", 3600 * NS_PER_S),
    "6h": ("Last 6 hours", 6 * 3600 * NS_PER_S),
    "24h": ("Last 24 hours", 24 * 3600 * NS_PER_S),
    "7d": ("Last 7 days", 7 * 86400 * NS_PER_S),
    "30d": ("Last 30 days", 30 * 86400 * NS_PER_S),
    "all": ("All time", None),
}
"""Lookback choices: key → (label, window in ns, ``None`` for no lower bound). "All time" exists because
imported files often hold traces that are years old."""
DEFAULT_LOOKBACK = "all"
STATUSES = ("Error", "Ok", "Unset")
"""Span status choices, as the reader spells them; no choice means any status."""
DEFAULT_LIMIT = 20
MAX_LIMIT = 1_000


class FormError(ValueError):
    """Input the user has to correct; the message says what and how."""


@dataclass(frozen=True)
class SearchForm:
    """Raw values of the search form, as Dash delivers them (``None`` for an empty field).

    Attributes:
        service, operation: exact names, or None for any.
        min_duration_ms, max_duration_ms: span duration bounds in **ms** (floats allowed): a trace matches when
            one of its spans lasts that long (Jaeger's rule).
        lookback: a key of :data:`LOOKBACKS`; ignored when ``start`` or ``end`` is given.
        attributes: ``key=value`` pairs separated by spaces; quote values with spaces (``k="a b"``).
        status: one of :data:`STATUSES`, or None for any.
        limit: most traces to list.
        min_trace_ms, max_trace_ms: bounds on the whole trace's duration in **ms** (first start to last end).
        start, end: an absolute time range, UTC, ``YYYY-MM-DD HH:MM[:SS]`` (or ``T`` between date and time).
        sort: one of :data:`query.trace_search.SORTS`.
        stage: the stage (an ``analysis.STAGES`` name) the ``longest_stage`` sort ranks by; None otherwise.
    """

    service: str | None = None
    operation: str | None = None
    min_duration_ms: float | None = None
    max_duration_ms: float | None = None
    lookback: str = DEFAULT_LOOKBACK
    attributes: str | None = None
    status: str | None = None
    limit: int | None = DEFAULT_LIMIT
    min_trace_ms: float | None = None
    max_trace_ms: float | None = None
    start: str | None = None
    end: str | None = None
    sort: str = "newest"
    stage: str | None = None


def parse_attribute_filter(text: str | None) -> tuple[tuple[str, str], ...]:
    """``'http.status_code=500 user="a b"'`` → ``(("http.status_code", "500"), ("user", "a b"))``.

    Raises:
        FormError: unbalanced quotes, or a term without ``=`` or with an empty key.
    """
    if not text or not text.strip():
        return ()
    try:
        terms = shlex.split(text)
    except ValueError as exc:
        raise FormError(f'attribute filter: {exc} (quote values with spaces: key="a b")') from exc
    pairs = []
    for term in terms:
        key, separator, value = term.partition("=")
        if not separator or not key.strip():
            raise FormError(f"attribute filter: {term!r} is not key=value")
        pairs.append((key.strip(), value))
    return tuple(pairs)


def build_trace_query(form: SearchForm, now_ns: int) -> TraceQuery:
    """The :class:`TraceQuery` for ``form``; ``now_ns`` (Unix ns) anchors the lookback window.

    Raises:
        FormError: a negative duration, a minimum above the maximum, an unknown lookback or status, a
            limit out of 1..:data:`MAX_LIMIT`, or a bad attribute filter.
    """
    if form.lookback not in LOOKBACKS:
        raise FormError(f"unknown lookback {form.lookback!r}")
    if form.status and form.status not in STATUSES:
        raise FormError(f"unknown status {form.status!r}")
    window_ns = LOOKBACKS[form.lookback][1]
    min_ns = _ms_to_ns("min duration", form.min_duration_ms)
    max_ns = _ms_to_ns("max duration", form.max_duration_ms)
    if min_ns is not None and max_ns is not None and min_ns > max_ns:
        raise FormError("min duration is above max duration")
    limit = DEFAULT_LIMIT if form.limit is None else int(form.limit)
    if not 1 <= limit <= MAX_LIMIT:
        raise FormError(f"limit must be between 1 and {MAX_LIMIT}")
    return TraceQuery(
        service=form.service or None,
        operation=form.operation or None,
        start_ns=None if window_ns is None else now_ns - window_ns,
        end_ns=None,
        min_duration_ns=min_ns,
        max_duration_ns=max_ns,
        attributes=parse_attribute_filter(form.attributes),
        status_code=form.status or None,
        limit=limit,
    )


def build_search(form: SearchForm, now_ns: int) -> TraceSearch:
    """The :class:`~query.trace_search.TraceSearch` for ``form``: :func:`build_trace_query`'s span filters with
    the absolute range (when given) in place of the lookback, the trace-duration bounds and the sort.

    Raises:
        FormError: what :func:`build_trace_query` raises, an unreadable or reversed time range, a negative or
            reversed trace-duration bound, an unknown sort, or the sort by a stage without a known stage.
    """
    query = build_trace_query(form, now_ns)
    start, end = parse_time(form.start, "start"), parse_time(form.end, "end")
    if start is not None and end is not None and start > end:
        raise FormError("the time range ends before it starts")
    if start is not None or end is not None:
        query = replace(query, start_ns=start, end_ns=end)
    low, high = _ms_to_ns("min trace duration", form.min_trace_ms), _ms_to_ns("max trace duration", form.max_trace_ms)
    if low is not None and high is not None and low > high:
        raise FormError("min trace duration is above max trace duration")
    if form.sort not in SORTS:
        raise FormError(f"unknown sort {form.sort!r}")
    if form.sort == "longest_stage" and form.stage not in STAGES:
        raise FormError("choose the stage to sort by (Stage, below Sort)")
    stage = form.stage if form.sort == "longest_stage" else ""
    return TraceSearch(query, low, high, form.sort, query.limit, stage or "")  # type: ignore[arg-type]


def parse_time(text: str | None, label: str) -> int | None:
    """A UTC time typed as ``YYYY-MM-DD HH:MM[:SS]`` (or ISO 8601 with ``T``; a bare date is midnight) as ns
    since the epoch; None for an empty field.

    Raises:
        FormError: the text is no such time.
    """
    if not text or not text.strip():
        return None
    try:
        moment = datetime.fromisoformat(text.strip().replace(" ", "T", 1))
    except ValueError as exc:
        raise FormError(f"{label}: {shorten(text.strip(), 40)!r} is not a time (YYYY-MM-DD HH:MM, UTC)") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


def form_to_url(form: SearchForm) -> str:
    """The URL query string (with ``?``, or ``""``) holding every field of ``form`` that differs from the
    default, so a search can be bookmarked, shared and reloaded."""
    default = SearchForm()
    values = {
        field.name: getattr(form, field.name)
        for field in fields(SearchForm)
        if getattr(form, field.name) not in (None, "") and getattr(form, field.name) != getattr(default, field.name)
    }
    return f"?{urlencode(values)}" if values else ""


def form_from_url(values: Mapping[str, str]) -> SearchForm:
    """The form a URL's query string (:func:`form_to_url`) holds; numbers that do not parse are left empty (the
    search then runs without them), unknown keys are ignored."""
    known = {field.name: field for field in fields(SearchForm)}
    parsed: dict[str, object] = {}
    for key, raw in values.items():
        if key not in known or raw is None or raw == "":
            continue
        if key in ("min_duration_ms", "max_duration_ms", "min_trace_ms", "max_trace_ms", "limit"):
            try:
                number = float(raw)
            except ValueError:
                continue
            parsed[key] = int(number) if key == "limit" else number
        else:
            parsed[key] = str(raw)
    return SearchForm(**parsed)  # type: ignore[arg-type]


def normalize_trace_id(text: str | None) -> str:
    """A typed or pasted trace ID as stored (:func:`query.store.normalize_trace_id`, the API's rule too): 32
    lowercase hex characters; a 16-character (64-bit) ID is left-padded with zeros (README.md, "Ingest rules").

    Raises:
        FormError: empty, or not a trace ID (the message quotes it).
    """
    trace_id = (text or "").strip()
    if not trace_id:
        raise FormError("enter a trace ID")
    try:
        return store.normalize_trace_id(trace_id)
    except store.IdError:
        raise FormError(f"{shorten(trace_id, 40)!r} is not a trace ID (16 or 32 hex characters)") from None


def _ms_to_ns(label: str, value_ms: float | None) -> int | None:
    if value_ms is None:
        return None
    if value_ms < 0:
        raise FormError(f"{label} must not be negative")
    return round(float(value_ms) * 1_000_000)
