"""Sorting many small groups of timestamps with one single-key sort.

Several analyses order items by (group, time): children by (parent, end), boundaries by (trace, time).
Multi-key sorts of millions of rows are slow; packing both keys into one Int64 makes them one sort. Times are
nanoseconds since the epoch (about 2**61), so they are first made *comparable within a trace*: as ns since
the trace's first timestamp when that fits in the packed key, else as their rank among all timestamps of the
traces (one exact multi-key sort, taken only for pathological inputs such as day-long traces in a batch of
millions of spans). Only comparisons within one trace are preserved, which is all a group of one trace needs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from analysis.ancestry import IntArray

_KEY_LIMIT = 1 << 62


def comparable_times(trace: IntArray, times: Sequence[IntArray], groups: int) -> tuple[list[IntArray], int]:
    """``times`` (arrays aligned with ``trace``) as non-negative Int64 values that order the same way within
    each trace and all lie below the returned bound, chosen so that ``groups * bound`` fits in an Int64 key.

    Raises:
        ValueError: even ranks do not fit (more than about 2**31 timestamps per group key).
    """
    if not trace.size:
        return [t.copy() for t in times], 1
    traces = int(trace.max()) + 1
    first = np.full(traces, np.iinfo(np.int64).max, dtype=np.int64)
    for t in times:
        np.minimum.at(first, trace, t)
    relative = [t - first[trace] for t in times]
    bound = int(max(int(r.max()) for r in relative)) + 1
    if max(groups, 1) * bound < _KEY_LIMIT:
        return relative, bound
    all_trace = np.concatenate([trace] * len(times))
    all_time = np.concatenate(list(times))
    order = np.lexsort((all_time, all_trace))
    sorted_trace, sorted_time = all_trace[order], all_time[order]
    distinct = np.r_[True, (sorted_trace[1:] != sorted_trace[:-1]) | (sorted_time[1:] != sorted_time[:-1])]
    rank = np.empty(all_time.size, dtype=np.int64)
    rank[order] = np.cumsum(distinct) - 1
    bound = int(rank.max()) + 1
    if max(groups, 1) * bound >= _KEY_LIMIT:
        raise ValueError("too many timestamps to order in one batch; analyse fewer traces at once")
    return np.split(rank, len(times)), bound


def siblings_starting_in(
    tree_arrays: tuple[IntArray, IntArray, IntArray],
    siblings: IntArray,
    owners: IntArray,
    windows: tuple[IntArray, IntArray],
    *,
    closed: bool,
) -> tuple[IntArray, IntArray]:
    """(owner, sibling) pairs: each owner span with every candidate sibling (same parent) that starts in the
    owner's window, ``[low, high)`` or, ``closed``, ``[low, high]``. Pairs come grouped by owner.

    Args:
        tree_arrays: ``trace``, ``parent`` and ``start_ns`` of every span (``SpanTree`` arrays, ns).
        siblings: indices of the candidate spans.
        owners: indices of the owner spans.
        windows: ``low`` and ``high`` per owner (ns since the epoch, aligned with ``owners``).

    One sort of the candidates by a (parent, start) key (:func:`comparable_times`) and two binary searches per
    owner, so no Python loop over spans.
    """
    trace, parent, start = tree_arrays
    low, high = windows
    empty = np.empty(0, dtype=np.int64)
    if not siblings.size or not owners.size:
        return empty, empty
    times = np.concatenate([start[siblings], low, high])
    owner_traces = np.concatenate([trace[siblings], trace[owners], trace[owners]])
    (relative,), bound = comparable_times(owner_traces, [times], int(parent.max()) + 1)
    sibling_key = parent[siblings] * bound + relative[: siblings.size]
    window_low = parent[owners] * bound + relative[siblings.size : siblings.size + owners.size]
    window_high = parent[owners] * bound + relative[siblings.size + owners.size :]
    order = np.argsort(sibling_key, kind="stable")
    siblings, sibling_key = siblings[order], sibling_key[order]
    first = np.searchsorted(sibling_key, window_low, side="left")
    count = np.maximum(np.searchsorted(sibling_key, window_high, side="right" if closed else "left") - first, 0)
    offset = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    return np.repeat(owners, count), siblings[np.repeat(first, count) + offset]


def stable_order(key: IntArray) -> IntArray:
    """Indices that sort ``key`` ascending, equal keys keeping their input order."""
    frame = pl.DataFrame({"key": key}).with_row_index("index")
    return frame.sort("key", maintain_order=True)["index"].to_numpy().astype(np.int64)


def union_lengths(group: IntArray, trace: IntArray, intervals: tuple[IntArray, IntArray], groups: int) -> IntArray:
    """Per group, the length of the union of its intervals (ns; Int64, ``groups`` long, 0 for a group without
    any), so overlapping intervals count once.

    Args:
        group: the group of each interval, ``0 <= group < groups``.
        trace: the trace of each interval (a group's intervals are all of one trace: times are compared within it).
        intervals: ``(start, end)`` per interval, ns since the epoch, ``start <= end``.

    One sweep over every group at once: +1 at each start, -1 at each end, events ordered by (group, time); the union
    is the total length between consecutive events of a group while the running count is positive.
    """
    start, end = intervals
    events = np.concatenate([group, group])
    time = np.concatenate([start, end])
    step = np.concatenate([np.ones(group.size, dtype=np.int64), -np.ones(group.size, dtype=np.int64)])
    (comparable,), bound = comparable_times(np.concatenate([trace, trace]), [time], groups)
    order = stable_order(events * bound + comparable)
    events, time, active = events[order], time[order], np.cumsum(step[order]) > 0
    covering = active[:-1] & (events[1:] == events[:-1])
    return whole_sums(events[:-1][covering], (time[1:] - time[:-1])[covering], groups)


def whole_sums(group: IntArray, values: IntArray, groups: int) -> IntArray:
    """Per group, the sum of its ``values`` (Int64, ``groups`` long; ``0 <= group < groups``): ``np.bincount``'s
    float sums where they are exact (all below 2^53), else int64 sums (``np.add.at``, unbuffered, slower): a span
    from 1970 to 2262 lasts about 2^63 ns, which as a float does not cast back."""
    sums = np.bincount(group, weights=values, minlength=groups)
    if not sums.size or np.abs(sums).max() < 2**53:
        return sums.astype(np.int64)
    exact = np.zeros(groups, dtype=np.int64)
    np.add.at(exact, group, values)
    return exact
