"""Jaeger UI's critical path, for every tree of every trace at once.

Semantics (jaeger-ui ``packages/jaeger-ui/src/components/TracePage/CriticalPath/``: ``index``,
``utils/findLastFinishingChildSpan``, ``utils/getChildOfSpans``, ``utils/sanitizeOverFlowingChildren``):

1. FOLLOWS_FROM children and their subtrees are removed; overflowing children are cut to their parent and
   children wholly outside it dropped with their subtrees (:attr:`analysis.tree.SpanTree.clamped`).
2. Starting at the root with the bound ``t = root end``: take the child that finishes last (ties: the one
   that started first, then the earlier span); the parent's stretch from that child's end to ``t`` is on
   the path; walk into the child with ``t = child end``. When a span has no child ending before ``t``, its
   stretch from its start to ``t`` is on the path and the walk returns to its parent with
   ``t = that span's start``, where the last child finishing at or before ``t`` is taken next.

   Jaeger UI takes the last child finishing *strictly* before ``t``, which skips a sibling that ends exactly
   when the next one starts (back-to-back steps, and every step of a tracer with millisecond start times once
   :attr:`analysis.tree.SpanTree.clamped` has trimmed its sub-millisecond overlaps); CRISP's happens-before
   (Zhang et al., USENIX ATC 2022) counts it, and so does this.

Because the walk enters every child with a fresh bound (its own end), the children a span walks through
depend only on that span: its *chain* is ``c1`` = the last-finishing child, ``c(k+1)`` = the last child
finishing at or before ``ck`` starts (other than ``ck``). A span is on the critical path when it and every
ancestor are in their parent's chain, and its sections are the gaps its chain leaves:
``[c1.end, span.end]``, ``[c(k+1).end, ck.start]``, ..., ``[span.start, c_last.start]`` (empty ones
omitted), or its whole interval when it has no eligible child. So the path is computed without a walk:
one sort and one binary search find every child's successor, chains advance in lock step (as many rounds
as the longest chain, one gather each), and the ancestor condition is a pointer-jumping reduction, so a
15,000-deep chain costs 15 rounds and nothing recurses.

The sections of a tree tile its root's interval exactly, so per root they sum to the root's duration.
Every root gets its own path (as Jaeger UI does for each root span); the trace's root is
``SpanTree.primary_root`` (see :mod:`analysis.tree` for multi-root traces).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis import ancestry
from analysis.ancestry import BoolArray, IntArray
from analysis.ordering import comparable_times, stable_order
from analysis.tree import SpanTree, as_tree


@dataclass(frozen=True)
class Sections:
    """Critical-path sections as aligned arrays, in no particular order.

    Attributes:
        span: index of the span the section belongs to (into ``SpanTree.spans``).
        start_ns, end_ns: the section, Int64 ns since the epoch, ``end_ns > start_ns``.
        on_path: per span (not per section), whether the span is on its tree's critical path.
    """

    span: IntArray
    start_ns: IntArray
    end_ns: IntArray
    on_path: BoolArray


def critical_path_sections(tree: SpanTree) -> Sections:
    """The critical path of every tree in ``tree`` (algorithm in the module docstring)."""
    clamped = tree.clamped
    low, high = clamped.start_ns, clamped.end_ns
    children = np.flatnonzero((tree.parent >= 0) & ~clamped.excluded)
    parent = tree.parent[children]
    # Key (parent, latest end first). Children come in index order, which among siblings is clamped-start
    # order (clamping keeps siblings' start order), so a stable sort yields (parent, end desc, start, index).
    (child_start, child_end), bound = comparable_times(tree.trace[children], [low[children], high[children]], tree.size)
    end_key = parent * bound + (bound - 1 - child_end)
    order = stable_order(end_key)
    ordered, ordered_parent, sorted_key = children[order], parent[order], end_key[order]
    # A child's successor: the first sibling after it in that order ending at or before the child starts. Later
    # in the order means ending no later, and a zero-length child is passed over, so chains always advance.
    ends_by_start = np.searchsorted(sorted_key, (parent * bound + (bound - 1 - child_start))[order], side="left")
    successor = np.maximum(ends_by_start, np.arange(ordered.size) + 1)
    inside = successor < ordered.size
    inside[inside] = ordered_parent[successor[inside]] == ordered_parent[inside]
    successor = np.where(inside, successor, -1)

    in_chain = np.zeros(tree.size, dtype=bool)
    in_chain[tree.parent < 0] = True
    group_first = np.flatnonzero(np.r_[True, ordered_parent[1:] != ordered_parent[:-1]]) if ordered.size else ordered
    chain_parent, chain_child = [], []
    position = group_first
    while position.size:
        chain_parent.append(ordered_parent[position])
        chain_child.append(ordered[position])
        position = successor[position]
        position = position[position >= 0]
    if chain_child:
        in_chain[np.concatenate(chain_child)] = True
    on_path = ~clamped.excluded & ~ancestry.any_on_path(tree.parent, ~in_chain)

    links_parent = np.concatenate(chain_parent) if chain_parent else np.empty(0, dtype=np.int64)
    links_child = np.concatenate(chain_child) if chain_child else np.empty(0, dtype=np.int64)
    return _gaps(tree, low, high, on_path, links_parent, links_child)


def _gaps(
    tree: SpanTree, low: IntArray, high: IntArray, on_path: BoolArray, parent: IntArray, child: IntArray
) -> Sections:
    """Sections of the on-path spans from their chains (``parent[i]`` walks through ``child[i]``, in chain
    order within each parent)."""
    keep = on_path[parent]
    parent, child = parent[keep], child[keep]
    order = np.argsort(parent, kind="stable")
    parent, child = parent[order], child[order]
    first = np.r_[True, parent[1:] != parent[:-1]] if parent.size else np.empty(0, dtype=bool)
    last = np.r_[parent[1:] != parent[:-1], True] if parent.size else np.empty(0, dtype=bool)
    upper = np.where(first, high[parent], np.r_[0, low[child[:-1]]] if child.size else high[parent])
    walked = np.zeros(tree.size, dtype=bool)
    walked[parent] = True
    leaves = np.flatnonzero(on_path & ~walked)
    span = np.concatenate([parent, parent[last], leaves])
    start = np.concatenate([high[child], low[parent[last]], low[leaves]])
    end = np.concatenate([upper, low[child[last]], high[leaves]])
    nonempty = end > start
    return Sections(span[nonempty], start[nonempty], end[nonempty], on_path)


def own_critical_ns(sections: Sections, start_ns: IntArray, end_ns: IntArray) -> IntArray:
    """Per span (``start_ns``/``end_ns``: the spans' intervals, ns), the ns of the critical-path ``sections`` that
    belong to it and lie inside its own interval."""
    inside = np.minimum(sections.end_ns, end_ns[sections.span]) - np.maximum(sections.start_ns, start_ns[sections.span])
    own = np.zeros(start_ns.size, dtype=np.int64)
    np.add.at(own, sections.span, np.clip(inside, 0, None))
    return own


def critical_path(spans: pl.DataFrame | SpanTree) -> pl.DataFrame:
    """The critical-path sections of every tree, one row per section.

    Args:
        spans: a span frame (contract in :mod:`analysis.spans`) of any number of traces, or its
            :class:`~analysis.tree.SpanTree`.

    Returns:
        trace_id, root_span_id, span_id (String); in_primary_tree (Boolean: the section belongs to the
        trace's root, so it counts in the request's decomposition); start_ns, end_ns, duration_ns (Int64,
        ns since the epoch / ns). Sorted by trace, then span order, then start. Per root the durations sum
        to the root span's duration.
    """
    tree = as_tree(spans)
    sections = critical_path_sections(tree)
    ids = tree.spans["span_id"]
    order = np.lexsort((sections.start_ns, sections.span))
    span, start, end = sections.span[order], sections.start_ns[order], sections.end_ns[order]
    return pl.DataFrame(
        {
            "trace_id": tree.spans["trace_id"].gather(span),
            "root_span_id": ids.gather(tree.root[span]),
            "span_id": ids.gather(span),
            "in_primary_tree": tree.in_primary_tree[span],
            "start_ns": start,
            "end_ns": end,
            "duration_ns": end - start,
        }
    )


def critical_path_by_span(spans: pl.DataFrame | SpanTree) -> pl.DataFrame:
    """Every span with its part of the critical path.

    Returns:
        One row per span in ``SpanTree.spans`` order: trace_id, span_id (String); on_critical_path
        (Boolean); critical_path_ns (Int64, sum of the sections); sections (List(Struct{start_ns: Int64,
        end_ns: Int64}), empty for spans off the path); clamped_start_ns, clamped_end_ns (Int64, the span as
        the critical path sees it; null for spans excluded by the FOLLOWS_FROM or overflow rules).
    """
    tree = as_tree(spans)
    sections = critical_path_sections(tree)
    per_span = (
        pl.DataFrame({"index": sections.span, "start_ns": sections.start_ns, "end_ns": sections.end_ns})
        .sort("index", "start_ns")
        .group_by("index", maintain_order=True)
        .agg(
            (pl.col("end_ns") - pl.col("start_ns")).sum().alias("critical_path_ns"),
            pl.struct("start_ns", "end_ns").alias("sections"),
        )
    )
    clamped = tree.clamped
    base = pl.DataFrame(
        {
            "index": np.arange(tree.size),
            "trace_id": tree.spans["trace_id"],
            "span_id": tree.spans["span_id"],
            "on_critical_path": sections.on_path,
            "excluded": clamped.excluded,
            "clamped_start_ns": clamped.start_ns,
            "clamped_end_ns": clamped.end_ns,
        }
    ).with_columns(pl.when(~pl.col("excluded")).then(pl.col("clamped_start_ns", "clamped_end_ns")).name.keep())
    empty = pl.lit([], dtype=pl.List(pl.Struct({"start_ns": pl.Int64, "end_ns": pl.Int64})))
    return (
        base.join(per_span, on="index", how="left", maintain_order="left")
        .with_columns(pl.col("critical_path_ns").fill_null(0), pl.col("sections").fill_null(empty))
        .select(
            "trace_id",
            "span_id",
            "on_critical_path",
            "critical_path_ns",
            "sections",
            "clamped_start_ns",
            "clamped_end_ns",
        )
    )
