"""An adjuster for requests whose work runs in a task that outlives the span that started it.

A server can answer a request at once and do the work in a task it spawned (``tokio::spawn``,
``asyncio.create_task``, a goroutine) that carries the request's trace context: the Codex CLI's app server
answers the JSON-RPC ``turn/start`` in 11-16 ms and runs the whole turn, every model request and tool, in
``session_task.turn``, a span whose parent ``codex.turn_input`` ended at the spawn (Codex 0.171.0,
``tests/realworld/captures/codex``). Jaeger UI's critical path cuts overflowing children to their parent
(``sanitizeOverFlowingChildren``), so the request would read as its ~15 ms answer and none of its work, while
the trace's duration as Jaeger and Tempo show it (earliest start to latest end) is the turn's.

Rule (Hotspan's): a span T is a **spawned task** of its parent P when both are of one service, T is INTERNAL
or UNSPECIFIED and not a FOLLOWS_FROM child, T starts within P, T ends after P by more than P's own duration and
more than :data:`MIN_OVERHANG_NS` (most of T's life comes after P returned: a clock or rounding error between
spans of one process is far smaller), and an LLM call (a stage rule's call or an engine span) lies at or below
T. Then P and its ancestors, up to the first that already ends later and no further than the task's local root
(a SERVER span, or the last ancestor of the task's service), are analysed as ending when T ends, so every view
reads the request's time up to the task's end. A task that runs the request's model calls is the request's work (Codex's
turn, an agent server's background run); work without one that outlives the request (a flush, a notification)
is what the caller does not wait for, and stays cut to its parent as in Jaeger UI, as does a child that
overflows its parent by less (the trace page then says the Stages page counts the root span's time). Remote
spans (another service, or a SERVER span) are :mod:`analysis.remote_spans`' to place.

**Work started after its parent returned** (issue 27: an async generator consumed after its caller's span ended,
an A2A / JSON-RPC server task started after the handler answered, a streamed reply read later) is the same thing
seen from further on: a span T of any kind and service that lasts, is not a FOLLOWS_FROM child, starts at or after
the end of its parent (or of any ancestor) and before the request's window ends (:mod:`analysis.request_window`).
Jaeger UI drops T with its whole subtree; here T is a spawned task whose ancestors, of any service, end no earlier
than T or the window's end, whichever comes first: the work is kept where the request's end waits for it, and
nothing past the window is added (spans inside a parent that is itself such work are kept with it, unmarked).
This runs after :mod:`analysis.remote_spans` has lifted or shifted a SERVER span below a CLIENT span (clock skew,
a streamed response) and after :mod:`analysis.request_window` has set the window.
"""

from __future__ import annotations

import numpy as np

from analysis import ancestry
from analysis.ancestry import BoolArray, IntArray
from analysis.stages import NO_SPLIT, RuleMatch
from analysis.tree import SPAWNED, SpanTree, adjusted_tree
from units import NS_PER_MS

MIN_OVERHANG_NS = NS_PER_MS
"""Least overhang (ns) of a spawned task past its parent's end: the OTel JS SDK's millisecond starts can make
a child seem to end up to 1 ms after its parent (tests/realworld/README.md, "Timestamps")."""
TASK_KINDS = ("Internal", "Unspecified")


def extend_to_spawned_tasks(tree: SpanTree, matched: RuleMatch) -> SpanTree:
    """``tree`` with the ancestors of spawned tasks ending when their tasks end (module docstring); ``tree``
    itself when no task outlives its parent so. ``matched`` is the rule match of ``tree``'s spans."""
    parent = tree.parent
    has_parent = parent >= 0
    above = np.where(has_parent, parent, 0)
    start, end = tree.start_ns, tree.end_ns
    overhang = end - end[above]
    outlives = (
        has_parent
        & ~tree.follows_from
        & (start >= start[above])
        & (start <= end[above])
        & (overhang > MIN_OVERHANG_NS)
        & (overhang > end[above] - start[above])
    )
    task = np.zeros(tree.size, dtype=bool)
    if outlives.any():
        # Names and kinds are read for the few spans that outlive their parent so, not for every span.
        candidates = np.flatnonzero(outlives)
        services = tree.spans["service_name"]
        same = (services.gather(candidates) == services.gather(above[candidates])).fill_null(False).to_numpy()
        internal = tree.spans["kind"].gather(candidates).is_in(TASK_KINDS).fill_null(False).to_numpy()
        task[candidates[same & internal]] = True
        if task.any():
            task &= _with_a_call_below(parent, matched.split != NO_SPLIT)
    # The extension stays in the task's process: up to its local root (a SERVER span, or the last span of the
    # task's service); a remote caller's span is remote_spans' to relate to an outliving server span.
    ended = np.maximum(end, _ends_needed(tree, np.flatnonzero(task), end, end, local=True)) if task.any() else end
    late = _started_late(tree, above, ended)
    if not task.any() and not late.any():
        return tree
    window_end = ended[tree.primary_root][tree.trace]
    # Every late span carries its own end up (a span below the head may outlast it); only the heads are marked.
    ended = np.maximum(ended, _ends_needed(tree, np.flatnonzero(late), np.minimum(end, window_end), ended, local=False))
    head = late & ~(late[above] & (tree.start_ns < end[above]))
    return adjusted_tree(tree, parent, (ended > end) | task | head, SPAWNED, end_ns=ended)


def _started_late(tree: SpanTree, above: IntArray, end: IntArray) -> BoolArray:
    """Per span, whether it is work started after its parent or an ancestor returned (module docstring), the
    spans ending at ``end`` (ns since the epoch: after the spawned tasks' extensions). ``above`` is each span's
    parent (any index for a root)."""
    has_parent, start = tree.parent >= 0, tree.start_ns
    # The earliest end on each span's ancestor path: a child starting at or after it lies outside an ancestor. Where
    # no span ends after its parent, that is each span's own end, and no pass up the tree is needed.
    overflowing = (has_parent & (end > end[above])).any()
    path_end = ancestry.reduce_to_root(tree.parent, end, np.minimum) if overflowing else end
    window_end = end[tree.primary_root][tree.trace]
    return has_parent & ~tree.follows_from & (start >= path_end[above]) & (end > start) & (start < window_end)


def _ends_needed(tree: SpanTree, tasks: IntArray, ends: IntArray, end: IntArray, *, local: bool) -> IntArray:
    """Per span, the latest of ``ends`` (ns) of a spawned task below it that it must cover (-1 where none): the
    tasks' ends carried up their ancestor chains, the spans ending at ``end``; with ``local`` only from a span to
    its parent when both are of one service and the span is no SERVER span, and stopping at an ancestor that
    already ends later, else up to the root (an ancestor above one that ends later may still end earlier)."""
    parent = tree.parent
    services, kinds = tree.spans["service_name"], tree.spans["kind"]
    needed = np.full(parent.size, -1, dtype=np.int64)
    needed[tasks] = ends[tasks]
    rising = tasks
    while rising.size:
        rising = rising[parent[rising] >= 0]
        if local:
            same = (services.gather(rising) == services.gather(parent[rising])) & (kinds.gather(rising) != "Server")
            rising = rising[same.fill_null(False).to_numpy()]
        above = parent[rising]
        np.maximum.at(needed, above, needed[rising])
        rising = np.unique(above[needed[above] > end[above]] if local else above)
    return needed


def _with_a_call_below(parent: IntArray, call: BoolArray) -> BoolArray:
    """Per span, whether ``call`` holds for it or a span below it."""
    marked = np.zeros(parent.size, dtype=bool)
    reached = np.flatnonzero(call)
    while reached.size:
        marked[reached] = True
        reached = parent[reached]
        reached = np.unique(reached[reached >= 0])
        reached = reached[~marked[reached]]
    return marked
