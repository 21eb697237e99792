"""The wall-clock profiler's view: each instant split among the deepest spans active at that instant.

README.md ("Analysis") reports this second attribution beside the critical path's because Jaeger's
last-finishing-child rule can walk into a childless wrapper span that overlaps the subtree doing the work (a GraphQL
``graphql.execution`` sibling ending a little later) and hide that work. Here nothing is chosen: at every instant of
the trace's root span, the spans of greatest depth that are active share the instant equally. Only the spans the
critical path considers take part (the root's tree, FOLLOWS_FROM subtrees removed, overflowing children cut and
outside ones dropped, :attr:`analysis.tree.SpanTree.clamped`), so both views cover the same interval and each sums
to the root's duration.

Sweep line, vectorised over every trace: the span (and stage-piece) boundaries of a trace cut its root
interval into elementary segments; a span covers a contiguous run of them. The greatest depth on each
segment is a range-maximum "paint" done with a sparse table (two power-of-two blocks per span, pushed down
level by level); sorting segments by (greatest depth, position) then makes the segments where a span is
among the deepest one contiguous block, so counts per segment and each span's share are prefix-sum
differences. Traces are processed in chunks to bound memory. Shares are Float64 ns (a segment split three
ways has no integer split); per trace they sum to the root's duration up to float rounding (far below 1 ns).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from analysis.ancestry import IntArray
from analysis.ordering import comparable_times, stable_order
from analysis.stages import Pieces
from analysis.tree import SpanTree

SEGMENTS_PER_CHUNK = 1 << 20
"""About how many elementary segments one chunk of traces holds (memory ~ segments x levels x 4 bytes)."""


@dataclass(frozen=True)
class Shares:
    """Wall-clock shares of stage pieces, aligned arrays.

    Attributes:
        span: span index (into ``SpanTree.spans``).
        stage: index into :data:`~analysis.stage_rules.STAGES`.
        share_ns: Float64 ns of the trace's root interval credited to this piece.
    """

    span: IntArray
    stage: IntArray
    share_ns: npt.NDArray[np.float64]


def wall_clock_shares(tree: SpanTree, pieces: Pieces) -> Shares:
    """Split every trace's root interval among its deepest active spans (see the module docstring)."""
    clamped = tree.clamped
    taking_part = tree.in_primary_tree & ~clamped.excluded
    keep = taking_part[pieces.span]
    span, stage = pieces.span[keep], pieces.stage[keep]
    start = np.maximum(pieces.start_ns[keep], clamped.start_ns[span])
    end = np.minimum(pieces.end_ns[keep], clamped.end_ns[span])
    lasting = end > start
    span, stage, start, end = span[lasting], stage[lasting], start[lasting], end[lasting]
    trace = tree.trace[span]
    depth = tree.depth[span].astype(np.int64)

    share = np.zeros(span.size, dtype=np.float64)
    for first, last in _chunks(trace):
        share[first:last] = _shares(trace[first:last], depth[first:last], start[first:last], end[first:last])
    return Shares(span, stage, share)


def _chunks(trace: IntArray) -> list[tuple[int, int]]:
    """Contiguous unit ranges, whole traces each, of about :data:`SEGMENTS_PER_CHUNK` boundaries."""
    if not trace.size:
        return []
    trace_starts = np.flatnonzero(np.r_[True, trace[1:] != trace[:-1]])
    # Each unit adds at most two boundaries.
    cuts = trace_starts[np.unique(2 * trace_starts // SEGMENTS_PER_CHUNK, return_index=True)[1]]
    edges = np.r_[cuts, trace.size]
    return list(zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True))


def _shares(trace: IntArray, depth: IntArray, start: IntArray, end: IntArray) -> npt.NDArray[np.float64]:
    units = trace.size
    # Boundaries: every unit's start and end, deduplicated per trace, in (trace, time) order.
    event_trace = np.concatenate([trace, trace])
    event_time = np.concatenate([start, end])
    (comparable,), bound = comparable_times(event_trace, [event_time], int(trace.max()) + 1)
    order = stable_order(event_trace * bound + comparable)
    sorted_trace, sorted_time = event_trace[order], event_time[order]
    new = np.r_[True, (sorted_trace[1:] != sorted_trace[:-1]) | (sorted_time[1:] != sorted_time[:-1])]
    boundary_id = np.empty(2 * units, dtype=np.int64)
    boundary_id[order] = np.cumsum(new) - 1
    low, high = boundary_id[:units], boundary_id[units:]
    boundary_trace, boundary_time = sorted_trace[new], sorted_time[new]
    segments = boundary_time.size
    # Segment j runs from boundary j to boundary j + 1 of the same trace.
    length = np.zeros(segments, dtype=np.float64)
    same = boundary_trace[1:] == boundary_trace[:-1]
    length[:-1][same] = (boundary_time[1:] - boundary_time[:-1])[same]

    deepest = _range_max(low, high, depth, segments)

    key = deepest * segments + np.arange(segments)
    by_key = stable_order(key)
    sorted_key = key[by_key]
    block_low = np.searchsorted(sorted_key, depth * segments + low)
    block_high = np.searchsorted(sorted_key, depth * segments + high)
    count = np.cumsum(np.bincount(block_low, minlength=segments + 1) - np.bincount(block_high, minlength=segments + 1))
    counted = count[:segments] > 0
    weight = np.zeros(segments, dtype=np.float64)
    weight[counted] = length[by_key][counted] / count[:segments][counted]
    prefix = np.r_[0.0, np.cumsum(weight)]
    return prefix[block_high] - prefix[block_low]


def _range_max(low: IntArray, high: IntArray, value: IntArray, size: int) -> IntArray:
    """For each position ``j < size``, the largest ``value[u]`` with ``low[u] <= j < high[u]`` (-1 if none).

    Each range is covered by two (possibly overlapping) blocks of length ``2**k``, ``k = floor(log2(len))``;
    maxima painted on those blocks are then pushed from level ``k`` to the two halves at level ``k - 1``.
    """
    span_length = high - low
    level = np.floor(np.log2(span_length)).astype(np.int64)
    levels = int(level.max()) + 1 if level.size else 1
    table = np.full((levels, size), -1, dtype=np.int64)
    flat = table.reshape(-1)
    np.maximum.at(flat, level * size + low, value)
    np.maximum.at(flat, level * size + high - (1 << level), value)
    for k in range(levels - 1, 0, -1):
        half = 1 << (k - 1)
        np.maximum(table[k - 1], table[k], out=table[k - 1])
        np.maximum(table[k - 1][half:], table[k][:-half], out=table[k - 1][half:])
    return table[0]
