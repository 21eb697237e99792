"""Reductions along the path from each span to its root, by pointer jumping.

A forest is given as a parent array (``parent[i]`` is the index of span ``i``'s parent, ``-1`` for a root).
Every function here works on all trees at once with numpy and needs ``ceil(log2(depth)) + 1`` rounds, each
touching only the spans whose path is not yet exhausted: a 15,000-deep chain takes 15 rounds, and no
Python call runs per span. There is no recursion.

The parent array must be acyclic: :mod:`analysis.tree` breaks the cycles of what was sent, and
:func:`reduce_many` raises on one an adjuster made rather than run forever.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def _rounds(count: int) -> int:
    """Pointer-jumping rounds that take every path of ``count`` spans past its end: ``ceil(log2(count + 1)) + 1``
    (each round doubles how far a span has jumped)."""
    return max(1, int(np.ceil(np.log2(count + 1)))) + 1


def reduce_many(
    parent: IntArray, columns: Sequence[tuple[npt.NDArray, Callable[[npt.NDArray, npt.NDArray], npt.NDArray]]]
) -> list[npt.NDArray]:
    """For every span and each ``(values, combine)`` pair, ``combine`` folded over the span's own value and
    every ancestor's (``combine`` must be associative: ``np.maximum``, ``np.minimum``, ``np.add``,
    ``np.logical_or``...). One pointer-jumping pass serves all pairs. Returns new arrays.

    Raises:
        ValueError: ``parent`` has a cycle (a path still open after ``ceil(log2(n)) + 1`` rounds, which reach
            past any root of an acyclic forest): an adjuster that moved spans under one another. Without the
            bound the rounds would never end, and a trace pipeline that analyses such a trace would hang on it.
    """
    accumulated = [values.copy() for values, _ in columns]
    jump = parent.copy()
    active = np.flatnonzero(jump >= 0)
    for _ in range(_rounds(parent.size)):
        if not active.size:
            return accumulated
        # Right-hand sides read the previous round's arrays before anything is written (Wyllie's list ranking).
        above = jump[active]
        for acc, (_, combine) in zip(accumulated, columns, strict=True):
            acc[active] = combine(acc[active], acc[above])
        jump[active] = jump[above]
        active = active[jump[active] >= 0]
    if active.size:
        raise ValueError(f"the parent array has a cycle through span indices {active[:8].tolist()}")
    return accumulated


def reduce_to_root(
    parent: IntArray, values: npt.NDArray, combine: Callable[[npt.NDArray, npt.NDArray], npt.NDArray]
) -> npt.NDArray:
    """:func:`reduce_many` for a single column."""
    return reduce_many(parent, [(values, combine)])[0]


def depths_and_roots(parent: IntArray) -> tuple[IntArray, IntArray]:
    """Per span, the number of its ancestors (0 for a root) and the index of its tree's root, in one pass.

    The root is a fold that keeps the upper value (``combine(a, b) = b``, associative), so the fold over a
    span's path yields the root's own index.
    """
    depth, root = reduce_many(
        parent,
        [((parent >= 0).astype(np.int64), np.add), (np.arange(parent.size, dtype=np.int64), _upper)],
    )
    return depth, root


def _upper(_: npt.NDArray, above: npt.NDArray) -> npt.NDArray:
    return above


def any_on_path(parent: IntArray, flags: BoolArray) -> BoolArray:
    """True where the span or one of its ancestors has ``flags`` set."""
    return reduce_to_root(parent, flags, np.logical_or)


def nearest_flagged(parent: IntArray, depth: IntArray, flags: BoolArray) -> IntArray:
    """Per span, the index of the deepest span among itself and its ancestors that has ``flags`` set, ``-1``
    where none has. ``depth`` is :func:`depths_and_roots`' depth."""
    index = np.arange(parent.size, dtype=np.int64)
    # Deepest = largest depth; the index rides in the low bits so one maximum carries both.
    key = np.where(flags, (depth.astype(np.int64) << 32) | index, -1)
    deepest = reduce_to_root(parent, key, np.maximum)
    return np.where(deepest >= 0, deepest & 0xFFFFFFFF, -1)


def unrooted(parent: IntArray) -> BoolArray:
    """True for spans whose parent chain never reaches a root: they lie on a cycle or lead into one.

    Runs ``ceil(log2(n)) + 1`` pointer-jumping rounds at most; a chain that has not reached a root after
    jumping more than ``n`` steps must have repeated a span.
    """
    n = parent.size
    jump = parent.copy()
    active = np.flatnonzero(jump >= 0)
    for _ in range(_rounds(n)):
        if not active.size:
            break
        jump[active] = jump[jump[active]]
        active = active[jump[active] >= 0]
    flags = np.zeros(n, dtype=bool)
    flags[active] = True
    return flags


def cycle_members(parent: IntArray, candidates: IntArray) -> IntArray:
    """The spans among ``candidates`` (indices of :func:`unrooted` spans) that lie on a cycle.

    After at least ``len(candidates)`` parent steps every chain is inside its cycle, and the spans reached
    then are exactly the cycle members (a cycle maps onto itself, so each of its members is reached).
    """
    far = parent.copy()
    for _ in range(_rounds(candidates.size)):
        far[candidates] = far[far[candidates]]
    return np.unique(far[candidates])


def min_on_cycle(parent: IntArray, members: IntArray, keys: IntArray) -> IntArray:
    """For each cycle member (``members``), the smallest ``keys`` value over its whole cycle."""
    acc = keys.copy()
    jump = parent.copy()
    for _ in range(_rounds(members.size)):
        above = jump[members]
        acc[members] = np.minimum(acc[members], acc[above])
        jump[members] = jump[above]
    return acc[members]


def reduce_subtrees(
    parent: IntArray, depth: IntArray, columns: list[tuple[npt.NDArray, np.ufunc]]
) -> list[npt.NDArray]:
    """Per span and ``(values, ufunc)`` pair, ``ufunc`` folded over the span's own value and every descendant's
    (``np.add``, ``np.minimum``, ``np.maximum``): level by level from the deepest, each level one ``ufunc.at``
    into its parents, so a 15,000-deep chain costs 15,000 small steps and nothing recurses."""
    folded = [values.copy() for values, _ in columns]
    by_depth = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max(initial=0)) + 2))
    for level in range(int(depth.max(initial=0)), 0, -1):
        members = by_depth[bounds[level] : bounds[level + 1]]
        for acc, (_, ufunc) in zip(folded, columns, strict=True):
            ufunc.at(acc, parent[members], acc[members])
    return folded
