"""An adjuster that keeps a request's work whole when it outlives the span that started it (issue 27).

A span T that starts while its parent P is open and ends after P ended is cut to P by Jaeger UI's critical path
(``sanitizeOverFlowingChildren``), and so is work that starts after P, or any ancestor, returned (Jaeger drops it
with its subtree). Real requests make both shapes:

- a task the handler spawned and did not await (``tokio::spawn``, ``asyncio.create_task``, a goroutine): the Codex
  CLI's app server answers the JSON-RPC ``turn/start`` in 11-16 ms and runs the whole turn, every model request and
  tool, in ``session_task.turn``, whose parent ``codex.turn_input`` ended at the spawn (Codex 0.171.0,
  ``tests/realworld/captures/codex``);
- fire-and-forget streaming: a handler (or an LLM SDK's call span) returns the stream and ends while the model
  still generates into it;
- a parent span that instrumentation ended early, before the children it started;
- an async generator consumed after its caller's span ended, an A2A / JSON-RPC server task started after the
  handler answered, a streamed reply read later.

Cut, the request reads as its ~15 ms answer, or a model call's tail becomes its caller's own time. The invariant
(Hotspan's, for every instrumentation alike): **work of the request keeps its whole duration, and every ancestor of
it is analysed as ending no earlier than it does**, the root included, so the request's window, its stage totals,
self time and both attributions hold every call's whole time.

- **Work of the request**: a span of the request's tree that lasts, is not a FOLLOWS_FROM child nor below one
  (such work does not block its parent, as in Jaeger), and starts before the request's window ends. The window
  ends at the root's end or at the end of work that outlives it, whichever is later: a span that starts while other
  work of the request still runs is the request's too. Grown in start order, it is a fixed point, computed with one
  sort and a running maximum per tree, with no loop over spans.
- Work that starts after the window ended (a flush after the answer, a background job started later) is what the
  request did not wait for, and stays cut as Jaeger UI cuts it; so is a child that ends at most
  :data:`MIN_OVERHANG_NS` after an ancestor (a millisecond clock's rounding, not work), unless it starts at or after
  that ancestor's end (under a span sent as started, 0 ns): cut, it would be dropped whole, so the ancestor ends
  with it.

A span that outlives its parent (or starts after it returned) is marked ``spawned``, unless an earlier adjuster
marked it (a stream log's call, a lifted server span: their own mark says more); an ancestor analysed as ending
later, ``extended``. :mod:`analysis.request_window` reports both per request, and how far the window runs past the
root's own end.

The analysis applies this after :mod:`analysis.remote_spans` (a server span that outlives its caller's span is
lifted under the span that waited for it, or shifted against clock skew, first: kept under a request span that
ended at the response's headers, it would stretch that span over the sibling that reads the stream, and the
critical path would lose the request) and :mod:`analysis.request_window` (the envelope of a
missing or unended root), and before :mod:`analysis.wrappers`, which compares siblings as the critical path sees
them (whole, now) and widens a wrapper to cover what it adopts. :mod:`analysis.early_actions` then cuts an LLM
call where its caller acted on its answer, on purpose: the call's tail is then the tool's time, the one exception
to the invariant.
"""

from __future__ import annotations

import numpy as np

from analysis import ancestry
from analysis.ancestry import BoolArray, IntArray
from analysis.ordering import comparable_times
from analysis.tree import EXTENDED, SPAWNED, SpanTree, adjusted_tree
from units import NS_PER_MS

MIN_OVERHANG_NS = NS_PER_MS
"""Most a span may end after an ancestor and still be cut to it: the OTel JS SDK's millisecond starts can make a
child seem to end up to 1 ms after its parent (tests/realworld/README.md, "Timestamps")."""


def extend_to_outliving_work(tree: SpanTree) -> SpanTree:
    """``tree`` with every ancestor of the request's work ending no earlier than that work (module docstring);
    ``tree`` itself when no span outlives its parent or starts after it returned."""
    parent, start, end = tree.parent, tree.start_ns, tree.end_ns
    has_parent = parent >= 0
    above = np.where(has_parent, parent, 0)
    waited = has_parent & ~tree.follows_from & (end > start)
    outside = waited & ((end > end[above] + MIN_OVERHANG_NS) | (start >= end[above]))
    if not outside.any():
        return tree
    # Only the trees holding such a span are looked at; a FOLLOWS_FROM subtree is never work its parent waits for.
    members = np.isin(tree.root, tree.root[outside])
    if tree.follows_from.any():
        members &= ~ancestry.any_on_path(parent, tree.follows_from)
    work = _work(tree, members & (waited | ~has_parent))
    ended = _latest_end_below(parent, np.flatnonzero(work & has_parent & (end > end[above])), end)
    # A clock tick's overhang is cut, but work starting at or after an ancestor's end would be dropped whole (a span
    # under one sent as started, 0 ns): that ancestor ends with it, whatever the overhang.
    late = np.flatnonzero(work & has_parent & (start >= end[above]))
    ended = np.where(ended > end + MIN_OVERHANG_NS, ended, _holding_late_work(parent, start, end, late))
    extended = ended > end
    if not extended.any():
        return tree
    heads = work & has_parent & extended[above] & ((end > end[above] + MIN_OVERHANG_NS) | (start >= end[above]))
    unmarked = np.ones(tree.size, dtype=bool) if tree.adjustment is None else tree.adjustment == 0
    codes = np.where(heads, SPAWNED, EXTENDED).astype(np.int8)
    return adjusted_tree(tree, parent, extended | (heads & unmarked), codes, end_ns=ended)


def _work(tree: SpanTree, candidate: BoolArray) -> BoolArray:
    """Per span, whether it is work of its request (module docstring) among the ``candidate`` spans (the roots of
    their trees among them): sorted by (tree, start, the root first), a span is work while no earlier span of its
    tree started at or after the latest end before it, the root's included."""
    index = np.flatnonzero(candidate)
    root = tree.root[index]
    # A span starting before its root (clock skew) is ordered as if it started with it: it is clamped there.
    start = np.maximum(tree.start_ns[index], tree.start_ns[root])
    order = np.lexsort((index != root, start, root))
    index, root, start = index[order], root[order], start[order]
    group = np.cumsum(np.r_[True, root[1:] != root[:-1]]) - 1
    (start_key, end_key), bound = comparable_times(group, [start, tree.end_ns[index]], int(group[-1]) + 1)
    # Packed (group, time) keys rise with the group, so one running maximum never carries over to the next tree.
    latest = np.maximum.accumulate(group * bound + end_key)
    open_before = np.r_[-1, latest[:-1]]
    is_root = index == root
    broken = np.cumsum(~is_root & (group * bound + start_key >= open_before))
    first = np.maximum.accumulate(np.where(is_root, np.arange(index.size), 0))
    work = np.zeros(tree.size, dtype=bool)
    work[index[broken == broken[first]]] = True
    return work


def _holding_late_work(parent: IntArray, start: IntArray, end: IntArray, late: IntArray) -> IntArray:
    """Per span, the latest of its own end and the ends (ns) of the ``late`` spans below it that start at or after
    its end: each carried up its ancestor chain while the ancestor reached ended by the time it started."""
    holding = end.copy()
    head, at = late, parent[late]
    while head.size:
        np.maximum.at(holding, at, end[head])
        up = parent[at]
        keep = (up >= 0) & (start[head] >= end[np.maximum(up, 0)])
        head, at = head[keep], up[keep]
    return holding


def _latest_end_below(parent: IntArray, heads: IntArray, end: IntArray) -> IntArray:
    """Per span, the latest of its own end and the ends (ns) of ``heads`` below it: each head's end carried up its
    ancestor chain, a round per level, continuing only from the spans whose value rose."""
    latest = end.copy()
    rising = heads
    while rising.size:
        rising = rising[parent[rising] >= 0]
        up = parent[rising]
        before = latest[up]
        np.maximum.at(latest, up, latest[rising])
        rising = np.unique(up[latest[up] > before])
    return latest
