"""An adjuster for server spans that do not fit inside the client span that called them.

A SERVER span answering a CLIENT span normally lies inside it. Three real causes break that, and Jaeger UI's
critical path (which cuts a child to its parent and drops a child lying wholly outside it) then loses the
server's work:

- **Streaming.** An HTTP client instrumentation ends its span when the response headers arrive, while the body
  streams on: an LLM server (vLLM, and the stack's emulator, which sends headers before the request reaches the
  engine) answers a streamed chat with headers first, so vLLM's ``llm_request`` starts when the client's
  ``POST`` span is ending and runs long after it; the caller's LLM span (``chat``) lasts until the last chunk.
  Observed with ``opentelemetry-instrumentation-httpx`` under the OpenAI SDK (``tests/realworld``).
- **Trailing work.** A server's instrumentation ends its span after the last byte is sent (ASGI/WSGI middleware, a
  log flush), and the caller, which already holds the answer, may end C and the spans above it first (the stack's
  tool server: a 4 ms span 0.4 ms past its client on a quiet host, 2 ms on a busy one).
- **Clock skew.** The server's host clock is off, so its span sits before, after or across an end of its client
  span (jaeger-ui's HotROD capture with the route service's clock 5 ms either way: every route call crosses an end
  of its client).

Only the span's start tells them apart on one clock: a server receives a request after its client sent it and
before the client has the answer, so S starting before C started or after C ended is skew, whatever the answer's
streaming or trailing does afterwards. S crossing C's end from inside is streaming or trailing on one clock and
skew across two, and only the hosts can say which: S and C whose resources name two hosts (:data:`CLOCK_KEYS`, the
first present) read two clocks, and then, as Jaeger's adjuster does (``jaeger`` ``model/adjuster/clockskew.go``:
spans of other hosts), a server span no longer than its client is skew when it does not lie inside it.

Rule, for a SERVER span S whose parent C is its caller's span (a CLIENT span, or any span of another service: the
Codex CLI marks the HTTP request that carries a model call INTERNAL, and a traced vLLM's ``llm_request`` joins its
trace under it, ``tests/realworld/captures/codex``):

1. **shift** when C is a CLIENT span of another service and S is skewed by the tests above: S and its subtree are
   moved by the offset that centres S in C when S is no longer than C (Jaeger's adjuster: the latency split evenly
   between both ends), else that starts S with C (Jaeger's placement of a child longer than its parent; its tail
   then outlives C, which :mod:`analysis.spawned_tasks` extends to hold it). A server below a moved one is moved
   with it, and then by its own skew relative to its moved client;
2. else nothing when C covers :data:`FIT_SHARE` of S, or S starts inside C with :data:`TRAILING_SHARE` of it there
   (trailing work: :mod:`analysis.spawned_tasks` cuts its tail to C when that is a clock tick, else ends C and its
   callers with it; lifted, such a span left the tool call that made it for the agent above, and read as a call of
   its own);
3. else **lift**: S is analysed as the child of the span that waited for it: a childless wrapper among C's other
   children (:func:`analysis.wrappers.wrapper_kinds`: a GraphQL ``graphql.execution`` beside the resolver's call)
   covering at least :data:`FIT_SHARE` of S, which would have adopted S had S fit in C (:mod:`analysis.wrappers`),
   else the nearest ancestor of C that covers that much of it: the work happened while the caller's enclosing
   operation waited (a stream; a caller other than a CLIENT span that returned before the server started);
4. else **shift** as in 1 when S is no longer than C and runs in another service;
5. else S stays where it is: work that outlives C, which :mod:`analysis.spawned_tasks` keeps whole, C and the
   spans above it ending with it (Jaeger UI's critical path would cut it to C).

So a skew's answer does not depend on its size: ascend.json's 5.1 ms and the same trace 5 s off give one critical
path (``tests/realworld/test_clock_skew.py``). What the spans cannot show: a few ms of skew crossing C's end where a
resource names no host reads as trailing work (Jaeger would move it; Hotspan's own stack names no host, and its tool
server's trailing spans, moved, changed what the event-loop diagnosis saw of its calls' ends).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from analysis import ancestry
from analysis.ancestry import BoolArray, IntArray
from analysis.spans import attribute
from analysis.stages import RuleMatch
from analysis.tree import LIFTED, SHIFTED, SpanTree, adjusted_tree
from analysis.wrappers import wrapper_kinds

FIT_SHARE = 0.9
"""Share of a server span its client (or the lifting ancestor) must cover for the span to fit in it."""
TRAILING_SHARE = 0.5
"""Share of a server span starting inside its client that the client must cover for the span to be the call's
work trailing its answer (a streamed response's engine span starts as its client ends: little of it is inside)."""
MAX_LEVELS = 64
"""Ancestors of the client tried for a lift."""
CLOCK_KEYS = ("host.id", "host.name", "k8s.node.name", "ip")
"""Resource attributes naming the host whose clock a span read, the first present taken: OpenTelemetry's host and
Kubernetes semantic conventions, and the ``ip`` process tag of Jaeger's clients (kept by the Jaeger import), the
host key of Jaeger's clock-skew adjuster."""


def adjust_remote_spans(tree: SpanTree, matched: RuleMatch) -> SpanTree:
    """``tree`` with server spans lifted or shifted (module docstring); ``tree`` itself when none is. ``matched``
    is the rule match of ``tree``'s spans (which of them are wrappers)."""
    kind = tree.spans["kind"].to_numpy()
    service = tree.spans["service_name"].to_numpy()
    child = np.flatnonzero((tree.parent >= 0) & (kind == "Server") & ~tree.follows_from)
    client = tree.parent[child]
    keep = (kind[client] == "Client") | (service[client] != service[child])
    child, client = child[keep], client[keep]
    start, end = tree.start_ns, tree.end_ns
    span_length = end - start
    covered, length = _covered(start, end, child, client), span_length[child]
    remote = service[child] != service[client]
    shorter = length <= span_length[client]
    inside = (start[child] >= start[client]) & (end[child] <= end[client])
    starts_outside = (start[child] < start[client]) | (start[child] > end[client])
    unheld_call = (kind[client] == "Client") & remote & ~inside
    two_clocks = np.zeros(child.size, dtype=bool)
    if (unheld_call & shorter & ~starts_outside).any():  # the hosts decide only these; most traces have none
        clock = _clock_keys(tree)
        two_clocks = (clock[child] != "") & (clock[client] != "") & (clock[child] != clock[client])
    skewed = unheld_call & (starts_outside | (shorter & two_clocks))
    trailing = (start[child] >= start[client]) & (start[child] < end[client]) & (covered >= TRAILING_SHARE * length)
    misfit = ~skewed & (covered < FIT_SHARE * length) & ~trailing
    if not (skewed.any() or misfit.any()):
        return tree

    lift_from, lift_client = child[misfit], client[misfit]
    lift_to = _containing_wrapper(tree, lift_from, lift_client, wrapper_kinds(tree, matched))
    unwrapped = lift_to < 0
    lift_to[unwrapped] = _containing_ancestor(tree, lift_from[unwrapped], lift_client[unwrapped])
    lifted = lift_to >= 0
    parent = tree.parent.copy()
    parent[lift_from[lifted]] = lift_to[lifted]
    changed = np.zeros(tree.size, dtype=bool)
    changed[lift_from[lifted]] = True
    lifted_tree = adjusted_tree(tree, parent, changed, LIFTED) if changed.any() else tree

    unlifted = np.zeros(child.size, dtype=bool)
    unlifted[np.flatnonzero(misfit)[~lifted]] = True
    shift = skewed | (unlifted & remote & shorter)
    shifted, shifted_client = child[shift], client[shift]
    if not shifted.size:
        return lifted_tree
    slack = np.maximum(span_length[shifted_client] - span_length[shifted], 0)
    offset = start[shifted_client] + slack // 2 - start[shifted]
    return adjusted_tree(lifted_tree, parent, _subtrees(tree, shifted), SHIFTED, _spread(tree, shifted, offset))


def _clock_keys(tree: SpanTree) -> np.ndarray:
    """Per span, the host its resource names (:data:`CLOCK_KEYS`), ``""`` where none or without resources."""
    if "resource_attributes" not in tree.spans.columns:
        return np.full(tree.size, "", dtype=object)
    keys = (attribute(key, "resource_attributes").replace("", None) for key in CLOCK_KEYS)
    return tree.spans.select(pl.coalesce(*keys).fill_null("")).to_series().to_numpy()


def _covered(start: IntArray, end: IntArray, span: IntArray, by: IntArray) -> IntArray:
    """ns of each ``span``'s interval that ``by`` (aligned) covers."""
    return np.maximum(np.minimum(end[span], end[by]) - np.maximum(start[span], start[by]), 0)


def _containing_wrapper(tree: SpanTree, span: IntArray, client: IntArray, wrapper: BoolArray) -> IntArray:
    """Per span, the childless wrapper among its client's other children covering :data:`FIT_SHARE` of it (as
    :mod:`analysis.wrappers` chooses: the one covering most, then the longer, then the earlier), -1 where none
    does. A wrapper that is itself one of the ``span`` (a server span its client does not hold either) adopts
    none: two such siblings over the same interval would each take the other, a cycle."""
    has_children = np.zeros(tree.size, dtype=bool)
    has_children[tree.parent[tree.parent >= 0]] = True
    wrappers = np.flatnonzero(wrapper & ~has_children & (tree.parent >= 0))
    wrappers = wrappers[np.argsort(tree.parent[wrappers], kind="stable")]
    first = np.searchsorted(tree.parent[wrappers], client, side="left")
    count = np.searchsorted(tree.parent[wrappers], client, side="right") - first
    which = np.repeat(np.arange(span.size), count)
    candidate = wrappers[np.repeat(first, count) + np.arange(which.size) - np.repeat(np.cumsum(count) - count, count)]
    covered = _covered(tree.start_ns, tree.end_ns, span[which], candidate)
    length = tree.end_ns[candidate] - tree.start_ns[candidate]
    fits = (covered >= FIT_SHARE * (tree.end_ns[span[which]] - tree.start_ns[span[which]])) & ~np.isin(candidate, span)
    which, candidate, covered, length = which[fits], candidate[fits], covered[fits], length[fits]
    best = np.lexsort((candidate, tree.start_ns[candidate], -length, -covered, which))
    found = np.full(span.size, -1, dtype=np.int64)
    found[which[best][::-1]] = candidate[best][::-1]
    return found


def _containing_ancestor(tree: SpanTree, span: IntArray, client: IntArray) -> IntArray:
    """Per span, the nearest ancestor of its client covering :data:`FIT_SHARE` of it, -1 where none does."""
    found = np.full(span.size, -1, dtype=np.int64)
    length = tree.end_ns[span] - tree.start_ns[span]
    candidate = tree.parent[client]
    open_ = np.flatnonzero(candidate >= 0)
    for _ in range(MAX_LEVELS):
        if not open_.size:
            break
        above = candidate[open_]
        fits = _covered(tree.start_ns, tree.end_ns, span[open_], above) >= FIT_SHARE * length[open_]
        found[open_[fits]] = above[fits]
        open_ = open_[~fits]
        candidate[open_] = tree.parent[candidate[open_]]
        open_ = open_[candidate[open_] >= 0]
    return found


def _subtrees(tree: SpanTree, heads: IntArray) -> np.ndarray:
    """Spans in the subtree of any of ``heads`` (heads included), as a mask."""
    return ancestry.any_on_path(tree.parent, np.isin(np.arange(tree.size), heads))


def _spread(tree: SpanTree, heads: IntArray, offset: IntArray) -> IntArray:
    """Per span, the offset (ns) of the nearest head above or at it, 0 outside every head's subtree. A head below
    another is first moved with it: its own ``offset`` (measured on the unmoved spans) is added to the offset of
    the nearest head above it, so it lands where its skew puts it relative to its moved client."""
    flags = np.isin(np.arange(tree.size), heads)
    nearest = ancestry.nearest_flagged(tree.parent, tree.depth, flags)
    total = np.zeros(tree.size, dtype=np.int64)
    total[heads] = offset
    above = np.where(tree.parent[heads] >= 0, nearest[np.maximum(tree.parent[heads], 0)], -1)
    for level in np.unique(tree.depth[heads]):
        at = (tree.depth[heads] == level) & (above >= 0)
        total[heads[at]] += total[above[at]]
    return np.where(nearest >= 0, total[np.maximum(nearest, 0)], 0)
