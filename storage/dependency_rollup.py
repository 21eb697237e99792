"""Service dependencies (``/api/dependencies``) from a per-minute rollup, equal to the answer of the raw spans.

The raw answer (:data:`storage.trace_sql.DEPENDENCY_CALLS`) joins every child span of the window to its parent: 3 s
for 1 h at 100M spans a day, and Jaeger UI asks for 24 h by default. Jaeger itself answers from a table its
``spark-dependencies`` job fills once a day; Hotspan keeps per-minute rows fresh instead, and reads the raw spans
only where the rows may be stale, so the answer is the raw one at every moment:

- **Rows** (``hotspan_dependency_minutes``): the raw query's calls per (owner tenant, minute of the child's start,
  parent service, child service). A child and its parent may arrive in different inserts, minutes apart, so no
  materialized view can count them; :meth:`DependencyRollup.refresh` runs the raw query over whole minutes and
  rewrites them.
- **Coverage** (``hotspan_dependency_coverage``): the minutes whose rows were recomputed, and those found stale since.
- **Watermark** (``hotspan_dependency_refreshes``): each refresh reads, on the ClickHouse clock that stamps arrivals
  (``hotspan_trace_arrivals.LastArrival``), the traces that received spans since the last watermark, and
  recomputes every minute those traces cover (a late parent changes calls of children in other minutes). Its new
  watermark is its start less ``margin_s`` (an insert stamped before it may become visible after it: the trace
  pipeline's ``visibility_margin_s``).
- **A read** (:func:`dependencies`) takes from the rows the whole minutes of its window that are covered and that no
  trace arriving after the watermark touches, and runs the raw query once over the rest (the partial minutes at both
  ends, stale and uncovered minutes: the stretches between rolled minutes). Each child span starts in one minute
  (its start is part of its identity), so the parts add up to the raw answer.
- **Deletions** (tail sampling's drops, :meth:`uncover`) mark their minutes uncovered; TTL drops rows, coverage and
  spans by the same day.

Without a refresh (no trace pipeline: ``--role collector`` or ``query`` alone with none elsewhere, a store only an
OTel Collector writes) every read is the raw query. Times: minutes are Unix seconds of their start; windows ns.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from storage import trace_sql
from storage.clickhouse import ClickHouse
from storage.tenancy import tenant_condition, tenant_parameters

log = logging.getLogger(__name__)

MINUTE_S = 60
_NS = 1_000_000_000
_LAST_MINUTE = 2**32 - 2 * MINUTE_S
"""The last minute a ``DateTime`` (UInt32 s) holds with a minute to spare."""
MIN_ROLLED = 10
"""Fewest rolled minutes worth reading the rollup for. A raw read of a few seconds costs nearly what one of ten
minutes does: the spans are sorted by service and span name before time, so any range reads a granule of every
(service, span name), 285-351 ms for 20-40 s against 570 ms for a whole hour at 10M spans a day (benchmarks/README.md,
"Dependencies from the rollup"); below this many minutes the window is read raw whole."""
HORIZON_S = 8 * 86_400
"""How far back a refresh keeps minutes covered by default: Jaeger UI's dependency page offers up to 7 days."""
MAX_STRETCHES = 8
"""Most stretches between rolled minutes one :func:`dependencies` call reads raw (one read, a range of spans each); a
window whose rolled minutes leave more is read raw whole."""
_LAST_SECOND = 2**32 - 1
"""The last second a ``DateTime`` holds."""

CLOCK = "SELECT toUnixTimestamp64Nano(now64(9))"

WATERMARK = "SELECT count(), toUnixTimestamp64Milli(max(Watermark)) FROM hotspan_dependency_refreshes"
"""Refreshes so far, and the latest watermark (ms since the epoch)."""

OLDEST_COVERED = "SELECT toUInt32(min(Timestamp)) FROM hotspan_dependency_coverage WHERE Covered = 1"
"""The oldest minute ever covered (Unix s; 0 when none)."""

COVERAGE = """
SELECT toUInt32(Timestamp) AS minute, argMax(Covered, Version) AS covered
FROM hotspan_dependency_coverage
WHERE Timestamp >= toDateTime({first:UInt32}) AND Timestamp <= toDateTime({last:UInt32})
GROUP BY Timestamp
"""
"""Each recorded minute of ``[first, last]`` (Unix s) and whether it is covered now (1) or was uncovered since (0):
reads take the covered ones; a refresh also retakes the uncovered ones older than its horizon (a backfill's, made
stale by a later arrival)."""

STALE = """
SELECT DISTINCT arrayJoin(range(
    toUInt32(toStartOfMinute(greatest(Start, toDateTime({first:UInt32})))),
    toUInt32(least(End, toDateTime({last:UInt32}) + 59)) + 1,
    60)) AS minute
FROM otel_traces_trace_id_ts
WHERE TraceId GLOBAL IN (
        SELECT TraceId FROM hotspan_trace_arrivals WHERE LastArrival > fromUnixTimestamp64Milli({watermark_ms:Int64})
    )
  AND End >= toDateTime({first:UInt32}) AND Start <= toDateTime({last:UInt32}) + 59
"""
"""The minutes in ``[first, last]`` (Unix s) of every trace that received spans after the watermark: each minute
from its first span's start to its last one's (``otel_traces_trace_id_ts``). ``GLOBAL``: on a cluster the arrivals of
every shard are looked up on every shard (one trace, one shard, so a local ``IN`` would do; a ``Distributed`` read
refuses it)."""

LIVE_KEYS = """
SELECT Tenant, toUInt32(Timestamp) AS minute, Parent, Child
FROM hotspan_dependency_minutes
WHERE toUInt32(Timestamp) IN {minutes:Array(UInt32)}
GROUP BY Tenant, Timestamp, Parent, Child
HAVING argMax(Calls, Version) > 0
"""
"""The rows of ``minutes`` holding calls: a recomputation writes 0 for those it no longer finds."""

ROLLED_CALLS = f"""
SELECT Parent, Child, sum(calls) AS call_count
FROM (
    SELECT Parent, Child, argMax(Calls, Version) AS calls
    FROM hotspan_dependency_minutes
    WHERE Timestamp >= toDateTime({{first:UInt32}}) AND Timestamp <= toDateTime({{last:UInt32}})
      AND toUInt32(Timestamp) IN {{minutes:Array(UInt32)}}
      AND {tenant_condition("Tenant")}
    GROUP BY Tenant, Timestamp, Parent, Child
)
GROUP BY Parent, Child
"""
"""Calls per (parent, child) over the rows of ``minutes`` (each key's latest row)."""

ROWS_SCHEMA = pa.schema(
    [
        ("Tenant", pa.string()),
        ("Timestamp", pa.timestamp("s")),
        ("Parent", pa.string()),
        ("Child", pa.string()),
        ("Calls", pa.uint64()),
        ("Version", pa.uint64()),
    ]
)
COVERAGE_SCHEMA = pa.schema([("Timestamp", pa.timestamp("s")), ("Covered", pa.uint8()), ("Version", pa.uint64())])


def dependencies(ch: ClickHouse, start_ns: int, end_ns: int, *, tenant: str | None) -> list[tuple[str, str, int]]:
    """``(parent service, child service, call count)`` for child spans starting in ``[start_ns, end_ns]`` (ns since
    the Unix epoch), sorted by parent, child: the raw query's answer (module docstring), from the rollup's rows where
    they hold it and from the raw spans over the stretches between them (the partial minutes at both ends, stale or
    uncovered minutes), all in one read. A window of fewer than :data:`MIN_ROLLED` rolled minutes, or more than
    :data:`MAX_STRETCHES` stretches, is read raw whole."""
    rolled = rolled_minutes(ch, start_ns, end_ns)
    stretches = _between(rolled, start_ns, end_ns)
    if len(rolled) < MIN_ROLLED or len(stretches) > MAX_STRETCHES:
        return raw_calls(ch, start_ns, end_ns, tenant=tenant)
    calls: Counter[tuple[str, str]] = Counter()
    parameters = {"first": rolled[0], "last": rolled[-1], "minutes": rolled, **tenant_parameters(tenant)}
    for parent, child, count in ch.query_rows(ROLLED_CALLS, parameters):
        calls[(parent, child)] += int(count)
    for parent, child, count in _raw_rows(ch, trace_sql.DEPENDENCIES, stretches, tenant=tenant):
        calls[(parent, child)] += int(count)
    return sorted((parent, child, count) for (parent, child), count in calls.items() if count)


def rolled_minutes(ch: ClickHouse, start_ns: int, end_ns: int) -> list[int]:
    """The minutes wholly inside ``[start_ns, end_ns]`` whose rows hold the raw answer now (sorted Unix s): covered,
    and touched by no trace that received spans after the last refresh's watermark. Empty without a refresh."""
    first = -(-start_ns // (MINUTE_S * _NS)) * MINUTE_S
    last = min((end_ns + 1) // (MINUTE_S * _NS) * MINUTE_S - MINUTE_S, _LAST_MINUTE)
    if last < first:
        return []
    refreshes, watermark_ms = ch.query_rows(WATERMARK)[0]
    if not refreshes:
        return []
    covered = _covered(ch, first, last)
    if covered:
        covered -= _stale(ch, int(watermark_ms), first, last)
    return sorted(covered)


def raw_calls(ch: ClickHouse, start_ns: int, end_ns: int, *, tenant: str | None) -> list[tuple[str, str, int]]:
    """The raw query's ``(parent, child, calls)`` for child spans starting in ``[start_ns, end_ns]`` (ns); sorted by
    parent, child."""
    rows = _raw_rows(ch, trace_sql.DEPENDENCIES, [(start_ns, end_ns)], tenant=tenant)
    return [(row[0], row[1], int(row[2])) for row in rows]


@dataclass(frozen=True)
class RefreshResult:
    """What one :meth:`DependencyRollup.refresh` did.

    Attributes:
        recomputed: minutes recomputed from the raw spans.
        left: stale or uncovered minutes left to later refreshes (more than ``max_minutes``).
        watermark_ms: the new watermark (ms since the epoch, ClickHouse clock).
    """

    recomputed: int
    left: int
    watermark_ms: int


class DependencyRollup:
    """Keeps ``hotspan_dependency_minutes`` equal to the raw spans' calls (module docstring).

    Args:
        ch: the store.
        margin_s: how long an insert stamped on the ClickHouse clock may take to become visible (seconds, >= 0).
        max_minutes: most minutes one :meth:`refresh` recomputes (newest first); the rest stay uncovered, read raw,
            until later refreshes take them.
        horizon_s: how far back from now a refresh keeps minutes covered (seconds; older minutes are read raw unless
            :meth:`backfill` covered them).

    Not thread-safe: one refresher per store (the trace pipeline's first shard runs it).
    """

    def __init__(
        self, ch: ClickHouse, *, margin_s: float = 300.0, max_minutes: int = 60, horizon_s: int = HORIZON_S
    ) -> None:
        if margin_s < 0 or max_minutes < 1 or horizon_s < MINUTE_S:
            raise ValueError(
                f"need margin_s >= 0, max_minutes >= 1, horizon_s >= 60; got {margin_s}, {max_minutes}, {horizon_s}"
            )
        self._ch = ch
        self._margin_ms = round(margin_s * 1000)
        self._max_minutes = max_minutes
        self._horizon_s = horizon_s

    def refresh(self) -> RefreshResult:
        """Recompute, newest first and at most ``max_minutes``, the minutes of the horizon that are not covered and
        the minutes (up to a day ahead, and older covered ones) that traces arriving since the last watermark touch;
        mark the stale ones it leaves uncovered; then record the new watermark (the commit: a refresh that fails
        before it is redone whole by the next).

        Raises:
            Exception: what storage raises.
        """
        version = int(self._ch.query_rows(CLOCK)[0][0])
        now = version // _NS // MINUTE_S * MINUTE_S
        first, last = now - self._horizon_s // MINUTE_S * MINUTE_S, now + 86_400
        # Minutes older than the horizon are kept fresh too where they are covered (a backfill's).
        oldest = min(first, int(self._ch.query_rows(OLDEST_COVERED)[0][0] or first))
        states = _coverage(self._ch, oldest, last)
        covered = {minute for minute, state in states.items() if state}
        refreshes, watermark_ms = self._ch.query_rows(WATERMARK)[0]
        stale = _stale(self._ch, int(watermark_ms), oldest, last) if refreshes else set()
        stale = {minute for minute in stale if minute >= first or minute in covered}
        uncovered = set(range(first, now + MINUTE_S, MINUTE_S)) - covered
        uncovered |= {minute for minute, state in states.items() if minute < first and not state}
        ordered = sorted(stale | uncovered, reverse=True)
        taken = sorted(ordered[: self._max_minutes])
        for run in _runs(taken):
            self._recompute(run, version)
        cover(self._ch, taken, 1, version)
        cover(self._ch, [minute for minute in ordered[self._max_minutes :] if minute in covered], 0, version)
        watermark = version // 1_000_000 - self._margin_ms
        self._ch.command(
            "INSERT INTO hotspan_dependency_refreshes (Timestamp, Watermark) "
            "VALUES (fromUnixTimestamp64Nano({version:Int64}), fromUnixTimestamp64Milli({watermark:Int64}))",
            {"watermark": watermark, "version": version},
        )
        left = len(ordered) - len(taken)
        if left:
            log.info("dependency rollup: %d minute(s) recomputed, %d left to later refreshes", len(taken), left)
        return RefreshResult(recomputed=len(taken), left=left, watermark_ms=watermark)

    def backfill(self, start_ns: int, end_ns: int) -> int:
        """Recompute and cover every minute holding an instant of ``[start_ns, end_ns]`` (ns), horizon or not, in
        reads of ``max_minutes`` minutes: an imported day older than the horizon, or a benchmark's store. Reads use
        the minutes once a refresh has run (its watermark says which later arrivals make them stale). Returns the
        minutes covered.

        Raises:
            Exception: what storage raises; the minutes covered before stay covered.
        """
        version = int(self._ch.query_rows(CLOCK)[0][0])
        first = start_ns // _NS // MINUTE_S * MINUTE_S
        minutes = list(range(first, min(end_ns // _NS, _LAST_MINUTE) + 1, MINUTE_S))
        for at in range(0, len(minutes), self._max_minutes):
            taken = minutes[at : at + self._max_minutes]
            self._recompute(taken, version)
            cover(self._ch, taken, 1, version)
        return len(minutes)

    def _recompute(self, minutes: list[int], version: int) -> None:
        """Rewrite the rows of ``minutes`` (sorted, within an hour of each other) from the raw spans; without the
        raw read when no trace lies there (most of a new store's horizon)."""
        windows = [(run[0] * _NS, (run[-1] + MINUTE_S) * _NS - 1) for run in _runs(minutes, gap_s=MINUTE_S)]
        bound = [(windows[0][0], windows[-1][1])]
        rows = _raw_rows(self._ch, trace_sql.DEPENDENCY_MINUTE_CALLS, windows, tenant=None, bounds=bound)
        found = {(row[0], int(row[1]), row[2], row[3]): int(row[4]) for row in rows}
        for key in self._ch.query_rows(LIVE_KEYS, {"minutes": minutes}):
            found.setdefault((key[0], int(key[1]), key[2], key[3]), 0)
        if not found:
            return
        tenants, times, parents, children = zip(*found, strict=True)
        table = pa.table(
            [
                pa.array(tenants, pa.string()),
                pa.array(times, pa.int64()).cast(pa.timestamp("s")),
                pa.array(parents, pa.string()),
                pa.array(children, pa.string()),
                pa.array(list(found.values()), pa.uint64()),
                pa.array([version] * len(found), pa.uint64()),
            ],
            schema=ROWS_SCHEMA,
        )
        self._ch.insert_arrow("hotspan_dependency_minutes", table)


def uncover(ch: ClickHouse, start_ns: int, end_ns: int) -> None:
    """Mark the minutes of ``[start_ns, end_ns]`` (ns) uncovered, at the ClickHouse clock's now: spans starting there
    were deleted (tail sampling), so reads take those minutes from the raw spans until a refresh recomputes them. A
    refresh that started before this call loses to it (its rows carry its start as version), also for a minute it
    covers after this call: so every minute a refresh may cover (the default horizon and the day ahead) is marked,
    not only those covered now, and older ones only when covered (by :meth:`DependencyRollup.backfill`)."""
    version = int(ch.query_rows(CLOCK)[0][0])
    first, last = start_ns // _NS // MINUTE_S * MINUTE_S, min(end_ns // _NS, _LAST_MINUTE)
    now = version // _NS // MINUTE_S * MINUTE_S
    reachable = range(max(first, now - HORIZON_S - MINUTE_S), min(last, now + 2 * 86_400) + 1, MINUTE_S)
    covered = _covered(ch, first, last)
    cover(ch, sorted(covered.union(reachable)), 0, version)


def cover(ch: ClickHouse, minutes: Sequence[int], covered: int, version: int) -> None:
    """Record ``minutes`` (Unix s) as covered (1) or not (0) with ``version`` (ns, ClickHouse clock)."""
    if not minutes:
        return
    rows = pa.table(
        [
            pa.array(minutes, pa.int64()).cast(pa.timestamp("s")),
            pa.array([covered] * len(minutes), pa.uint8()),
            pa.array([version] * len(minutes), pa.uint64()),
        ],
        schema=COVERAGE_SCHEMA,
    )
    ch.insert_arrow("hotspan_dependency_coverage", rows)


def _coverage(ch: ClickHouse, first: int, last: int) -> dict[int, int]:
    """Each recorded minute of ``[first, last]`` (Unix s): 1 when covered now, 0 when uncovered since."""
    return dict(ch.query_rows(COVERAGE, {"first": first, "last": last}))


def _covered(ch: ClickHouse, first: int, last: int) -> set[int]:
    """The covered minutes of ``[first, last]`` (Unix s)."""
    return {minute for minute, state in _coverage(ch, first, last).items() if state}


def _stale(ch: ClickHouse, watermark_ms: int, first: int, last: int) -> set[int]:
    """The minutes in ``[first, last]`` touched by traces that received spans after ``watermark_ms``."""
    parameters = {"first": first, "last": last, "watermark_ms": watermark_ms}
    return {int(row[0]) for row in ch.query_rows(STALE, parameters)}


def _raw_rows(
    ch: ClickHouse,
    template: str,
    windows: Sequence[tuple[int, int]],
    *,
    tenant: str | None,
    bounds: Sequence[tuple[int, int]] | None = None,
) -> list[tuple]:
    """The rows of ``template`` (:data:`storage.trace_sql.DEPENDENCIES` or ``DEPENDENCY_MINUTE_CALLS``) over the
    calls of child spans starting in ``windows`` ([start, end] ns, inclusive, disjoint), in one read of the spans of
    the traces overlapping ``bounds`` (default ``windows``). Wider bounds read more spans, never a different answer,
    and fewer cost the lookup less (three aggregates a bound): a refresh passes one for its scattered minutes. No
    rows, without the read, when no stored trace overlaps them."""
    if not windows:
        return []
    bounds = bounds or windows
    seconds = {}
    for at, (start_ns, end_ns) in enumerate(bounds):
        seconds[f"from_{at}"] = min(max(start_ns // _NS, 0), _LAST_SECOND)
        seconds[f"to_{at}"] = min(max(end_ns // _NS, 0), _LAST_SECOND)
    found = ch.query_rows(trace_sql.overlapping_traces(len(bounds)), seconds)[0]
    ranges = _merged(sorted((int(first), int(last)) for first, last, rows in found if rows))
    if not ranges:
        return []
    calls = trace_sql.DEPENDENCY_CALLS.replace("{span_ranges}", trace_sql.starting_in(len(ranges)))
    sql = template.replace("{calls}", ch.layout.on_every_shard(calls, ch.database, trace_sql.DEPENDENCY_TABLES))
    parameters = {"windows": [tuple(window) for window in windows], **tenant_parameters(tenant)}
    for at, (first, last) in enumerate(ranges):
        parameters |= {f"first_{at}": first, f"last_{at}": last}
    return ch.query_rows(sql, parameters)


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` (sorted closed ranges of whole seconds) with those that overlap or touch joined."""
    merged: list[tuple[int, int]] = []
    for first, last in ranges:
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def _between(rolled: list[int], start_ns: int, end_ns: int) -> list[tuple[int, int]]:
    """The stretches of ``[start_ns, end_ns]`` (ns, inclusive) outside the ``rolled`` minutes (sorted Unix s)."""
    stretches, at = [], start_ns
    for minute in rolled:
        if minute * _NS > at:
            stretches.append((at, minute * _NS - 1))
        at = (minute + MINUTE_S) * _NS
    if at <= end_ns:
        stretches.append((at, end_ns))
    return stretches


def _runs(minutes: list[int], gap_s: int = 3600) -> list[list[int]]:
    """``minutes`` (sorted) split where two lie more than ``gap_s`` apart: a refresh recomputes each run of an hour
    in one raw read, so none reads the parents of a week to recompute two minutes a week apart; a run of
    consecutive minutes (``gap_s`` 60) is one window of that read."""
    runs: list[list[int]] = []
    for minute in minutes:
        if runs and minute - runs[-1][-1] <= gap_s:
            runs[-1].append(minute)
        else:
            runs.append([minute])
    return runs
