"""The rows of a :class:`~query.trace_model.TraceView` a reader sees, and a window of them as compact columns.

What is visible follows an :class:`Expansion`, the reader's state:

- a **mode**: every subtree open (``all``), subtrees below a depth collapsed (``depth``: "collapse all below
  depth N"), or only the critical path open (``critical``: "expand the critical path": every span on it shows
  its children, every other span is collapsed);
- **toggles**: spans whose collapsed state the reader flipped from what the mode says;
- **aggregation**: above :data:`AGGREGATE_ABOVE` spans, siblings repeating one service and name (at least
  :data:`GROUP_MIN` of them) are one row with their count, time range and density, their subtrees hidden;
  ``opened`` lists the groups (by their first span) the reader opened member by member;
- a **search**: the spans whose name, service, span ID or attributes match are revealed (their ancestors
  opened, their groups shown member by member) and flagged.

Every step is a pass over arrays: each span's subtree is a run of rows (``TraceView.row`` to ``end_row``), so the
hidden rows are one difference array over the collapsed runs, and a million-span trace costs milliseconds.
A reader then asks for a :func:`window` of the visible rows: only those rows travel, with the stage pieces,
critical-path sections, untraced gaps and aggregate densities they draw, times in ns after the trace's start.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np

from analysis import STAGES
from analysis.ancestry import BoolArray, IntArray
from query.binning import bin_coverage
from query.trace_model import UNTRACED, TraceView

Mode = Literal["all", "depth", "critical"]
MODES: tuple[Mode, ...] = get_args(Mode)
AGGREGATE_ABOVE = 2_000
"""Spans above which repeated siblings are aggregated (SigNoz windows its waterfall above 10k spans, Jaeger UI
slows from 2-5k)."""
GROUP_MIN = 4
"""Siblings of one service and name that make an aggregate row."""
MAX_WINDOW_ROWS = 1_000
"""Most rows one :func:`window` returns."""
DENSITY_BINS = 48
"""Bins of an aggregate row's density strip."""
MAX_REVEAL = 500
"""Search matches revealed (their ancestors opened), first in row order; all are counted."""
MAX_MATCH_POSITIONS = 5_000
"""Visible positions of matches sent for "next match" navigation."""
MAX_TOGGLES = 10_000
"""Most toggled spans and opened groups an expansion may carry."""
MAX_PARTS_PER_ROW = 400
"""Most critical-path sections and untraced gaps sent per row (the longest): a span with thousands of children
has more than its row has pixels."""

NOTHING = -2
"""A lane bin no part covers (dropped before sending)."""

ERROR, CRITICAL, PARENT, COLLAPSED, AGGREGATE, ADJUSTED, BROKEN, MATCH = (1 << bit for bit in range(8))
"""Bits of a row's ``flags``: status Error (an aggregate: one of its spans); on the critical path; has children
(can be collapsed); collapsed (children hidden); an aggregate of repeated siblings; moved by an adjuster for the
analysis; a root because its parent link is broken (missing parent, self parent, cycle); matches the search."""


@dataclass(frozen=True)
class Expansion:
    """What the reader asked to see (module docstring). Hashable, so a view's last answer is reused.

    Attributes:
        mode: one of :data:`MODES`.
        depth: in ``depth`` mode, spans at this depth (0: roots) and deeper are collapsed.
        toggled: span indices whose collapsed state is flipped from the mode's.
        aggregate: aggregate repeated siblings (only above :data:`AGGREGATE_ABOVE` spans).
        opened: first spans (display order) of aggregate groups shown member by member.
        search: text to find (case-insensitive; ``key=value`` matches an attribute exactly).
    """

    mode: Mode = "all"
    depth: int = 2
    toggled: frozenset[int] = field(default_factory=frozenset)
    aggregate: bool = True
    opened: frozenset[int] = field(default_factory=frozenset)
    search: str = ""

    @classmethod
    def parse(cls, data: Mapping[str, object] | None) -> Expansion:
        """An expansion from its JSON form (the keys above; lists for the sets); missing keys take defaults.

        Raises:
            ValueError: an unknown mode, a negative depth, a toggle that is not an integer, or more than
                :data:`MAX_TOGGLES` toggles.
        """
        data = data or {}
        mode = str(data.get("mode") or "all")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
        depth = int(data.get("depth") or 0) if data.get("depth") is not None else 2
        if depth < 0:
            raise ValueError("depth must not be negative")

        def spans(key: str) -> frozenset[int]:
            values = data.get(key) or []
            if not isinstance(values, list | tuple) or len(values) > MAX_TOGGLES:
                raise ValueError(f"{key} must be a list of at most {MAX_TOGGLES} span indices")
            return frozenset(int(value) for value in values)

        return cls(
            mode=mode,  # type: ignore[arg-type]
            depth=depth,
            toggled=spans("toggled"),
            aggregate=bool(data.get("aggregate", True)),
            opened=spans("opened"),
            search=str(data.get("search") or "")[:200],
        )


@dataclass(frozen=True)
class Visible:
    """The rows an :class:`Expansion` shows.

    Attributes:
        rows: display rows shown, ascending (so ``view.order[rows]`` are the spans, top to bottom).
        collapsed: per span, its children are hidden by a collapse (only spans with children).
        aggregated: per group (``TraceView.groups``), it is shown as one row on its leader.
        matches: spans matching the search, in display order.
    """

    rows: IntArray
    collapsed: BoolArray
    aggregated: BoolArray
    matches: IntArray


_last: weakref.WeakKeyDictionary[TraceView, tuple[Expansion, Visible]] = weakref.WeakKeyDictionary()
_last_lock = threading.Lock()


def visible(view: TraceView, expansion: Expansion) -> Visible:
    """The rows ``expansion`` shows of ``view`` (module docstring); the last answer per view is reused, so a
    reader scrolling one expansion costs nothing here."""
    with _last_lock:
        known = _last.get(view)
    if known is not None and known[0] == expansion:
        return known[1]
    answer = _visible(view, expansion)
    with _last_lock:
        _last[view] = (expansion, answer)
    return answer


def _visible(view: TraceView, expansion: Expansion) -> Visible:
    n = view.size
    has_children = (view.end_row - view.row) > 1
    if expansion.mode == "depth":
        collapsed = has_children & (view.depth >= expansion.depth)
    elif expansion.mode == "critical":
        collapsed = has_children & ~view.on_critical_path
    else:
        collapsed = np.zeros(n, dtype=bool)
    toggled = _valid(expansion.toggled, n)
    collapsed[toggled] = ~collapsed[toggled]
    collapsed &= has_children

    groups = view.groups
    aggregated = np.zeros(groups.size.size, dtype=bool)
    if expansion.aggregate and n > AGGREGATE_ABOVE:
        aggregated = groups.size >= GROUP_MIN
        aggregated[groups.group[_valid(expansion.opened, n)]] = False
        if expansion.mode == "critical":
            aggregated[groups.group[view.on_critical_path]] = False

    matches = view.search(expansion.search)
    if matches.size:
        revealed = _ancestors(view.parent, matches[:MAX_REVEAL])
        collapsed[revealed] = False
        aggregated[groups.group[revealed]] = False
        aggregated[groups.group[matches[:MAX_REVEAL]]] = False

    # Hidden rows: under a collapsed span, under an aggregate's leader, and its other members with theirs.
    hide_from = [view.row[collapsed] + 1]
    hide_to = [view.end_row[collapsed]]
    if aggregated.any():
        in_aggregate = aggregated[groups.group]
        leader = in_aggregate & (groups.leader[groups.group] == np.arange(n))
        follower = in_aggregate & ~leader
        hide_from += [view.row[leader] + 1, view.row[follower]]
        hide_to += [view.end_row[leader], view.end_row[follower]]
    starts, stops = np.concatenate(hide_from), np.concatenate(hide_to)
    depth = np.cumsum(np.bincount(starts, minlength=n + 1) - np.bincount(stops, minlength=n + 1))[:n]
    return Visible(np.flatnonzero(depth == 0), collapsed, aggregated, matches)


def window(view: TraceView, expansion: Expansion, offset: int, limit: int) -> dict[str, object]:
    """Visible rows ``[offset, offset + limit)`` of ``view`` under ``expansion``, as JSON-ready columns.

    Returns:
        ``total`` (visible rows), ``offset`` (clamped), and

        - ``rows``: aligned lists: ``span`` (span index: what the reader sends back to open or toggle a
          span), ``depth``, ``name``, ``service`` (index into ``TraceView.services``), ``start``, ``end`` (ns
          after the trace's start; an aggregate's first start and last end), ``duration`` (ns; an aggregate's
          summed durations), ``self`` (ns of untraced time; 0 on an aggregate), ``count`` (spans on the row),
          ``hidden`` (rows a collapse or an aggregate hides), ``stage`` (index into :data:`analysis.STAGES`),
          ``flags`` (bits :data:`ERROR` ... :data:`MATCH`);
        - ``pieces``, ``critical``, ``gaps``: aligned lists ``row`` (position in this window), ``start``,
          ``end`` (ns after the trace's start), plus ``stage`` for pieces: split spans' stage pieces (vLLM's
          phases, an untraced call's first token and stream), critical-path sections, untraced stretches;
        - ``density``: ``row`` and ``bins`` (per aggregate row, :data:`DENSITY_BINS` values in [0, 1]: how
          many of its spans run in each bin of its time range, over the most in one bin);
        - ``matches``: ``count`` (spans matching the search), ``positions`` (visible rows of the first
          :data:`MAX_MATCH_POSITIONS` matches, for next/previous).

    Raises:
        ValueError: a negative ``offset`` or a ``limit`` outside ``1..MAX_WINDOW_ROWS``.
    """
    if offset < 0 or not 1 <= limit <= MAX_WINDOW_ROWS:
        raise ValueError(f"offset must be >= 0 and limit in 1..{MAX_WINDOW_ROWS}")
    shown = visible(view, expansion)
    total = int(shown.rows.size)
    offset = min(offset, max(total - 1, 0))
    span = view.order[shown.rows[offset : offset + limit]]
    groups = view.groups
    group = groups.group[span]
    aggregate = shown.aggregated[group] & (groups.leader[group] == span)
    single = ~aggregate
    base = view.start_ns
    flags = (
        np.where(aggregate, groups.errors[group] > 0, view.error[span]) * ERROR
        | view.on_critical_path[span] * CRITICAL
        | (((view.end_row - view.row)[span] > 1) | aggregate) * PARENT
        | shown.collapsed[span] * COLLAPSED
        | aggregate * AGGREGATE
        | (view.adjustment[span] != 0) * ADJUSTED
        | (view.root_reason[span] > 1) * BROKEN
        | np.isin(span, shown.matches) * MATCH
    )
    subtree_rows = view.end_row - view.row
    group_rows = np.bincount(groups.group, weights=subtree_rows, minlength=groups.size.size).astype(np.int64)
    hidden = np.where(aggregate, group_rows[group] - 1, np.where(shown.collapsed[span], subtree_rows[span] - 1, 0))
    rows = {
        "span": span,
        "depth": view.depth[span],
        "name": view.spans["name"].gather(span).fill_null("").to_list(),
        "service": view.service[span],
        "start": np.where(aggregate, groups.start_ns[group], view.span_start_ns[span]) - base,
        "end": np.where(aggregate, groups.end_ns[group], view.span_end_ns[span]) - base,
        "duration": np.where(aggregate, groups.total_ns[group], view.duration[span]),
        "self": np.where(aggregate, 0, view.self_ns[span]),
        "count": np.where(aggregate, groups.size[group], 1),
        "hidden": hidden,
        "stage": view.stage[span],
        "flags": flags,
    }
    positions = np.arange(span.size)
    tiled = np.isin(span, view.analysis.pieces.tiled) & single
    pieces = _ranges(view.analysis.pieces.offsets, positions[tiled], span[tiled])
    cuts = view.analysis.pieces
    offsets, section_start, section_end = view.critical_sections
    critical = _ranges(offsets, positions[single], span[single])
    critical = tuple(
        part[_longest(critical[0], section_end[critical[1]] - section_start[critical[1]])] for part in critical
    )
    with_gaps = single & (view.self_ns[span] > 0) & (subtree_rows[span] > 1)
    gap_of, gap_start, gap_end = view.gaps(span[with_gaps])
    keep = _longest(gap_of, gap_end - gap_start)
    gap_row, gap_start, gap_end = positions[with_gaps][gap_of[keep]], gap_start[keep], gap_end[keep]
    match_positions = np.searchsorted(shown.rows, view.row[shown.matches[:MAX_MATCH_POSITIONS]])
    match_visible = (match_positions < total) & (
        shown.rows[np.minimum(match_positions, max(total - 1, 0))] == view.row[shown.matches[:MAX_MATCH_POSITIONS]]
    )
    return {
        "total": total,
        "offset": offset,
        "rows": {key: _listed(value) for key, value in rows.items()},
        "pieces": {
            "row": _listed(pieces[0]),
            "stage": _listed(cuts.stage[pieces[1]]),
            "start": _listed(cuts.start_ns[pieces[1]] - base),
            "end": _listed(cuts.end_ns[pieces[1]] - base),
        },
        "critical": {
            "row": _listed(critical[0]),
            "start": _listed(section_start[critical[1]] - base),
            "end": _listed(section_end[critical[1]] - base),
        },
        "gaps": {"row": _listed(gap_row), "start": _listed(gap_start - base), "end": _listed(gap_end - base)},
        "density": _densities(view, positions[aggregate], group[aggregate]),
        "matches": {
            "count": int(shown.matches.size),
            "positions": _listed(match_positions[match_visible]),
        },
    }


def position_of(view: TraceView, expansion: Expansion, span: int) -> int | None:
    """The visible row (position) of ``span`` under ``expansion``, None when it is hidden or unknown."""
    if not 0 <= span < view.size:
        return None
    rows = visible(view, expansion).rows
    at = int(np.searchsorted(rows, view.row[span]))
    return at if at < rows.size and rows[at] == view.row[span] else None


def lane_window(view: TraceView, start_ns: int, end_ns: int, bins: int) -> dict[str, list[int]]:
    """The stage lane (``TraceView.lane``) within ``[start_ns, end_ns)`` (ns after the trace's start), as
    ``stage`` (index into :data:`analysis.STAGES`, or ``-1``: untraced), ``start``, ``end`` lists (ns after the
    trace's start): the exact parts, clipped, when they do not overlap and are at most ``3 * bins``; else the
    stage taking most of each of ``bins`` bins, runs merged. Time no part covers is left out."""
    lane = view.lane
    low, high = view.start_ns + max(start_ns, 0), view.start_ns + max(end_ns, start_ns + 1)
    inside = (lane.end_ns > low) & (lane.start_ns < high)
    stage = lane.stage[inside]
    start, end = np.maximum(lane.start_ns[inside], low), np.minimum(lane.end_ns[inside], high)
    if lane.overlapping or stage.size > 3 * bins:
        # Untraced time takes the category after the stages while binning.
        category = np.where(stage == UNTRACED, len(STAGES), stage)
        per_bin = bin_coverage(category, start, end, len(STAGES) + 1, low, high, bins)
        best = np.argmax(per_bin, axis=0)
        covered = per_bin[best, np.arange(bins)] > 1e-6
        edges = low + np.round(np.arange(bins + 1) * ((high - low) / bins)).astype(np.int64)
        codes = np.where(covered, np.where(best == len(STAGES), UNTRACED, best), NOTHING)
        first = np.r_[True, codes[1:] != codes[:-1]]
        last = np.r_[codes[1:] != codes[:-1], True]
        keep = codes[first] != NOTHING
        stage, start, end = codes[first][keep], edges[:-1][first][keep], edges[1:][last][keep]
    return {"stage": _listed(stage), "start": _listed(start - view.start_ns), "end": _listed(end - view.start_ns)}


def _densities(view: TraceView, rows: IntArray, groups_shown: IntArray) -> dict[str, list]:
    groups = view.groups
    bins: list[list[float]] = []
    for group in groups_shown.tolist():
        members = groups.members[groups.offsets[group] : groups.offsets[group + 1]]
        low, high = int(groups.start_ns[group]), int(groups.end_ns[group])
        covered = bin_coverage(
            np.zeros(members.size, dtype=np.int64),
            view.span_start_ns[members],
            view.span_end_ns[members],
            1,
            low,
            high,
            DENSITY_BINS,
        )[0]
        top = float(covered.max()) or 1.0
        bins.append([round(float(value) / top, 2) for value in covered])
    return {"row": _listed(rows), "bins": bins}


def _longest(row: IntArray, length: IntArray) -> IntArray:
    """Indices of the at most :data:`MAX_PARTS_PER_ROW` longest parts of each row (``row`` ascending), in their
    original order."""
    if not row.size:
        return np.arange(0)
    order = np.lexsort((-length, row))
    first = np.searchsorted(row[order], row[order], side="left")
    rank = np.arange(row.size) - first
    return np.sort(order[rank < MAX_PARTS_PER_ROW])


def _ranges(offsets: IntArray, positions: IntArray, spans: IntArray) -> tuple[IntArray, IntArray]:
    """For spans with items ``[offsets[s], offsets[s + 1])``: each item's window position and item index."""
    count = offsets[spans + 1] - offsets[spans]
    item_position = np.repeat(positions, count)
    first = np.repeat(offsets[spans] - (np.cumsum(count) - count), count)
    return item_position, first + np.arange(int(count.sum()))


def _ancestors(parent: IntArray, spans: IntArray) -> IntArray:
    """The strict ancestors of ``spans`` (span indices), each once."""
    seen = np.zeros(parent.size, dtype=bool)
    reached = parent[spans]
    while (reached := reached[reached >= 0]).size:
        reached = np.unique(reached[~seen[reached]])
        seen[reached] = True
        reached = parent[reached]
    return np.flatnonzero(seen)


def _valid(spans: frozenset[int], size: int) -> IntArray:
    """The span indices of ``spans`` inside ``0..size-1`` (others, however large, name no span and are ignored)."""
    inside = [value for value in spans if 0 <= value < size]
    return np.fromiter(inside, dtype=np.int64, count=len(inside))


def _listed(values: np.ndarray) -> list:
    return np.asarray(values).tolist()
