"""Self time: the part of a span's duration that none of its children covers.

Semantics of Jaeger UI's Trace Statistics (``packages/jaeger-ui/src/components/TracePage/TraceStatistics/
tableValues``, ``computeSelfTime``): a span's self time is its duration minus the union of its children's
intervals, each child cut to the span's own interval, so overlapping (parallel) children count once and a
child that overflows its parent only counts inside it. Children are CHILD_OF children only: a FOLLOWS_FROM
child (``follows_from`` in :mod:`analysis.tree`) does not block its parent, and the older Jaeger UI filtered
it out for the same reason. Orphans and link-only roots are no one's children.

The union is computed for all spans of all traces together, by one sweep over the children's clipped start
and end events ordered by (parent, time).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from analysis.ancestry import IntArray
from analysis.ordering import union_lengths
from analysis.tree import SpanTree, as_tree


def covered_by_children(tree: SpanTree, own: tuple[IntArray, IntArray] | None = None) -> IntArray:
    """Per span, ns of its interval (``own``: per span ``(start_ns, end_ns)`` to use instead of its interval in
    ``tree``) covered by the union of its CHILD_OF children's intervals in ``tree`` (Int64)."""
    low, high = own if own is not None else (tree.start_ns, tree.end_ns)
    child = np.flatnonzero((tree.parent >= 0) & ~tree.follows_from)
    parent = tree.parent[child]
    start = np.maximum(tree.start_ns[child], low[parent])
    end = np.minimum(tree.end_ns[child], high[parent])
    inside = end > start
    return union_lengths(parent[inside], tree.trace[parent[inside]], (start[inside], end[inside]), tree.size)


def self_times(tree: SpanTree, own: tuple[IntArray, IntArray] | None = None) -> IntArray:
    """Per span, self time in ns (Int64), aligned with ``tree.spans``: its interval (or ``own``, per span
    ``(start_ns, end_ns)``, an interval inside it) less what its children's intervals in ``tree`` cover."""
    low, high = own if own is not None else (tree.start_ns, tree.end_ns)
    return (high - low) - covered_by_children(tree, own)


def self_time(spans: pl.DataFrame | SpanTree) -> pl.DataFrame:
    """Self time of every span.

    Args:
        spans: a span frame (contract in :mod:`analysis.spans`) of any number of traces, or its
            :class:`~analysis.tree.SpanTree`.

    Returns:
        One row per span (duplicates removed, in ``SpanTree.spans`` order): trace_id, span_id (String),
        duration_ns, self_time_ns (Int64 ns; ``0 <= self_time_ns <= duration_ns``).
    """
    tree = as_tree(spans)
    return pl.DataFrame(
        {
            "trace_id": tree.spans["trace_id"],
            "span_id": tree.spans["span_id"],
            "duration_ns": tree.end_ns - tree.start_ns,
            "self_time_ns": self_times(tree),
        }
    )
