"""The parent/child structure of one trace, robust to what real traces get wrong.

Real traces arrive incomplete or inconsistent: a parent never reported (an orphan), a span naming
itself as parent, parent links that loop (A → B → A), two spans sharing one ID. :func:`build_span_tree`
never drops a span and never loops: every span ends up exactly once in a depth-first order, and a span
whose parent link cannot be followed becomes an extra root, labelled with the reason. Everything is
iterative, so a 15,000-deep chain costs no recursion.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import polars as pl


class RootReason(StrEnum):
    """Why a span is drawn as a root. ``NONE`` for spans that hang under their parent."""

    NONE = ""
    ROOT = "root"
    MISSING_PARENT = "missing parent"
    SELF_PARENT = "names itself as parent"
    PARENT_CYCLE = "parent cycle"


@dataclass(frozen=True)
class SpanTree:
    """Tree over the rows of one trace's span frame; every list has one entry per row (``n`` rows).

    Attributes:
        parent: row of each span's parent, ``-1`` for a root.
        depth: 0 for roots, parent's depth + 1 otherwise.
        order: all ``n`` rows in depth-first order; roots and siblings by start time
            (true roots before orphans), so a waterfall reads top-down like Jaeger's.
        root_reason: :class:`RootReason` of each row; ``NONE`` exactly where ``parent`` is not -1.
        duplicate: True for the second and later rows sharing one span ID (children attach to the first).
    """

    parent: list[int]
    depth: list[int]
    order: list[int]
    root_reason: list[RootReason]
    duplicate: list[bool]

    @property
    def size(self) -> int:
        """Number of spans (rows)."""
        return len(self.parent)

    @property
    def max_depth(self) -> int:
        """Deepest level, 0 for a flat trace; -1 for an empty one."""
        return max(self.depth, default=-1)

    def roots(self) -> list[int]:
        """Root rows in display order."""
        return [row for row in self.order if self.parent[row] == -1]

    def children(self) -> list[list[int]]:
        """Child rows of each row, in display order (by start time)."""
        kids: list[list[int]] = [[] for _ in range(self.size)]
        for row in self.order:
            if self.parent[row] != -1:
                kids[self.parent[row]].append(row)
        return kids


def build_span_tree(span_ids: Sequence[str], parent_ids: Sequence[str], starts_ns: Sequence[int]) -> SpanTree:
    """Link spans to parents and order them depth-first; O(n log n), no recursion.

    Args:
        span_ids: one ID per span (lowercase hex); duplicates allowed.
        parent_ids: each span's parent ID, ``""`` for none.
        starts_ns: each span's start (any consistent ns clock); orders siblings and picks which span of
            a parent cycle becomes its root (the earliest, as it most likely started the work).

    Returns:
        A :class:`SpanTree` over the input positions.

    Raises:
        ValueError: the three sequences differ in length.
    """
    n = len(span_ids)
    if len(parent_ids) != n or len(starts_ns) != n:
        raise ValueError(f"lengths differ: {n} span ids, {len(parent_ids)} parent ids, {len(starts_ns)} starts")
    first_row: dict[str, int] = {}
    duplicate = [False] * n
    for row, span_id in enumerate(span_ids):
        if span_id in first_row:
            duplicate[row] = True
        else:
            first_row[span_id] = row

    parent = [-1] * n
    reason = [RootReason.ROOT] * n
    for row, parent_id in enumerate(parent_ids):
        if not parent_id:
            continue
        if parent_id == span_ids[row]:
            reason[row] = RootReason.SELF_PARENT
        elif (target := first_row.get(parent_id)) is None:
            reason[row] = RootReason.MISSING_PARENT
        else:
            parent[row] = target
            reason[row] = RootReason.NONE
    _break_cycles(parent, reason, starts_ns)

    by_start = sorted(range(n), key=lambda row: (starts_ns[row], row))
    children: list[list[int]] = [[] for _ in range(n)]
    roots: list[int] = []
    for row in by_start:
        if parent[row] == -1:
            roots.append(row)
        else:
            children[parent[row]].append(row)
    roots.sort(key=lambda row: reason[row] is not RootReason.ROOT)

    depth = [0] * n
    order: list[int] = []
    stack = roots[::-1]
    while stack:
        row = stack.pop()
        order.append(row)
        for child in reversed(children[row]):
            depth[child] = depth[row] + 1
            stack.append(child)
    return SpanTree(parent=parent, depth=depth, order=order, root_reason=reason, duplicate=duplicate)


def span_tree(spans: pl.DataFrame) -> SpanTree:
    """:func:`build_span_tree` over a span frame with ``span_id``, ``parent_span_id`` and
    ``start_time_unix_nano`` (ns) columns, as :meth:`storage.reader.TraceReader.trace` returns;
    nulls count as "no ID" / "trace start"."""
    starts = spans["start_time_unix_nano"]
    earliest = starts.min()
    return build_span_tree(
        spans["span_id"].fill_null("").to_list(),
        spans["parent_span_id"].fill_null("").to_list(),
        starts.fill_null(earliest if earliest is not None else 0).to_list(),
    )


def _break_cycles(parent: list[int], reason: list[RootReason], starts_ns: Sequence[int]) -> None:
    """Cut every parent cycle in place at its earliest span, which becomes a root.

    Parent links form a functional graph; a walk up from each unvisited span either reaches a root,
    reaches an already finished span, or meets its own path again, which is a cycle. Each span is
    walked once, so this is O(n).
    """
    unseen, on_path, done = 0, 1, 2
    state = [unseen] * len(parent)
    for start in range(len(parent)):
        path: list[int] = []
        row = start
        while row != -1 and state[row] == unseen:
            state[row] = on_path
            path.append(row)
            row = parent[row]
        if row != -1 and state[row] == on_path:
            cycle = path[path.index(row) :]
            cut = min(cycle, key=lambda r: (starts_ns[r], r))
            parent[cut] = -1
            reason[cut] = RootReason.PARENT_CYCLE
        for visited in path:
            state[visited] = done
