"""An adjuster that stops childless wrapper spans from hiding the work their siblings' subtrees explain.

Real traces often carry two instrumentations of the same in-process work side by side: a GraphQL server's
childless ``graphql.execution`` span beside the resolver subtree that does the work (the shape of Jaeger UI's
GenAI fixture ``genaiTestTrace.json``), a framework's "run" span beside the handler's own spans. The wrapper
starts a little earlier or ends a little later than its sibling subtree, so Jaeger UI's critical path (the
last-finishing child, CRISP's rule) walks into the childless wrapper and credits it with the whole interval,
and self time and the wall-clock view give it every instant its sibling's deeper spans do not cover.

The same happens with LLM instrumentations that do not make their span current while the SDK sends (observed
with OpenLLMetry's LangChain instrumentation and Langfuse's OpenAI integration, ``tests/realworld``): the
childless ``ChatOpenAI.chat`` span and the HTTP request carrying it (with vLLM's spans below) are siblings.

Rule (Hotspan's, in the spirit of Jaeger's adjusters that repair the span model before any view reads it), for a
childless span W and a sibling S (same parent, neither FOLLOWS_FROM) lying inside W: the part of S's interval
(both cut to their parent, as the critical path sees them) that W covers is at least :data:`CONTAINED_SHARE` of
S's, and W ranks before S (longer, then earlier, then first in span order, so two spans never adopt each other).

- W is a **wrapper** when it is not itself work: its kind is INTERNAL, SERVER or UNSPECIFIED (a childless CLIENT
  or PRODUCER span is a remote call whose far side is untraced), it is not split (an engine span or an LLM
  call) and its stage is none of :data:`WORK_STAGES`. A wrapper adopts any S that is not a wrapper itself.
- W is a **detached LLM call** when its rule makes it an LLM call. It adopts an S that is the request carrying
  a model call: a ``transport`` rule's span, another LLM call or an engine span.

And for an LLM call W that has children: once the request carrying it (a child of the kinds above) has ended, a
sibling S starting after that end and lying inside W is work the caller ran while W's span stayed open (the
Vercel AI SDK runs a streamed step's tools before it closes ``ai.streamText.doStream``; tests/realworld), and W
adopts it: the model's time ended with its request. Likewise for a span that reads a call's stream (a span of an
``llm.stream`` rule that is no call, with children: the Codex CLI's ``receiving_stream`` > ``handle_responses``,
which stays open while the turn runs the tools the answer asked for) once its last child has ended.

S is then analysed as W's child, so W's own time is only what S leaves uncovered (and a detached call's request
carries it, or its engine spans trace it, as if the instrumentation had nested them), and W as covering S: where S
starts a little before W or ends a little after it, W's interval is widened to S's (marked ``extended``), so no
part of S is cut away (the analysis keeps every span's whole time, :mod:`analysis.spawned_tasks`). Among several
spans that may adopt S, the one covering most of it wins (then the longer, then the earlier). Rounds repeat until
nothing changes, so a wrapper around another wrapper that adopted work adopts it in turn. The span's reported
parent is kept (:attr:`analysis.tree.SpanTree.reported_parent`); only the analysis reads the adjusted one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.ancestry import BoolArray, IntArray
from analysis.ordering import siblings_starting_in
from analysis.stage_rules import STAGES
from analysis.stages import NO_SPLIT, RuleMatch
from analysis.tree import EXTENDED, WRAPPED, SpanTree, adjusted_tree

WORK_STAGES = frozenset({"network", "retrieval", "tool", *(stage for stage in STAGES if stage.startswith("llm."))})
"""Stages whose spans are work themselves, never wrappers."""
WRAPPER_KINDS = ("Internal", "Server", "Unspecified")
CONTAINED_SHARE = 0.9
"""Share of a sibling's interval a wrapper must cover to adopt it (a little overhang either side is usual)."""
MAX_ROUNDS = 8


def adopt_wrapped_siblings(tree: SpanTree, matched: RuleMatch) -> SpanTree:
    """``tree`` with siblings re-parented under the childless spans that contain them (module docstring);
    ``tree`` itself when no span is adopted. ``matched`` is the rule match of ``tree``'s spans."""
    attached = (tree.parent >= 0) & ~tree.follows_from & ~tree.clamped.dropped
    eligible = attached & wrapper_kinds(tree, matched)
    call = attached & matched.call
    reader = attached & matched.stream_reader
    request = matched.transport | (matched.split != NO_SPLIT)
    low, high = tree.clamped.start_ns, tree.clamped.end_ns
    rank = np.empty(tree.size, dtype=np.int64)
    rank[np.lexsort((np.arange(tree.size), low, -(high - low)))] = np.arange(tree.size)
    parent = tree.parent.copy()
    adopted = np.zeros(tree.size, dtype=bool)
    for _ in range(MAX_ROUNDS):
        has_children = np.zeros(tree.size, dtype=bool)
        has_children[parent[parent >= 0]] = True
        wrapper, detached = eligible & ~has_children, call & ~has_children
        # When the request a call has made ended (-1: it has made none).
        request_end = np.full(tree.size, -1, dtype=np.int64)
        carrying = np.flatnonzero(request & (parent >= 0))
        np.maximum.at(request_end, parent[carrying], high[carrying])
        read = reader & has_children
        children = np.flatnonzero(read[np.maximum(parent, 0)] & (parent >= 0))
        np.maximum.at(request_end, parent[children], high[children])
        finished = (call | read) & (request_end >= 0)
        adopters = Adopters(wrapper, detached, finished, request_end)
        child, by = _containments(tree.trace, parent, (low, high, rank), adopters, attached & ~wrapper, request)
        if not child.size:
            break
        parent[child] = by
        adopted[child] = True
    if not adopted.any():
        return tree
    start, end = _covering(parent, np.flatnonzero(adopted), tree.start_ns, tree.end_ns)
    widened = (start != tree.start_ns) | (end != tree.end_ns)
    codes = np.where(adopted, WRAPPED, EXTENDED).astype(np.int8)
    return adjusted_tree(tree, parent, adopted | widened, codes, end_ns=end, start_ns=start)


def wrapper_kinds(tree: SpanTree, matched: RuleMatch) -> BoolArray:
    """Spans that are no work themselves (module docstring: their kind, stage and split), with or without
    children: a childless one among them is a wrapper."""
    kinds = tree.spans["kind"].is_in(WRAPPER_KINDS).to_numpy()
    work = np.isin(matched.stage, [STAGES.index(stage) for stage in WORK_STAGES])
    return kinds & ~work & (matched.split == NO_SPLIT)


def _covering(parent: IntArray, adopted: IntArray, start: IntArray, end: IntArray) -> tuple[IntArray, IntArray]:
    """Per span, its interval (ns since the epoch) widened to cover the ``adopted`` spans it adopted, and what
    those adopted in turn (a round per level of adoption)."""
    start, end = start.copy(), end.copy()
    for _ in range(MAX_ROUNDS + 1):
        before = (start[parent[adopted]], end[parent[adopted]])
        np.minimum.at(start, parent[adopted], start[adopted])
        np.maximum.at(end, parent[adopted], end[adopted])
        if (start[parent[adopted]] == before[0]).all() and (end[parent[adopted]] == before[1]).all():
            break
    return start, end


@dataclass(frozen=True)
class Adopters:
    """The spans that may adopt siblings this round, per kind (module docstring), and for each span the end of
    the last request it has made (-1: none)."""

    wrapper: BoolArray
    detached: BoolArray
    finished: BoolArray
    request_end: IntArray


def _containments(
    trace: IntArray,
    parent: IntArray,
    intervals: tuple[IntArray, IntArray, IntArray],
    adopters: Adopters,
    candidate: BoolArray,
    request: BoolArray,
) -> tuple[IntArray, IntArray]:
    """(sibling, adopter) pairs to re-parent this round: each candidate sibling with its best containing,
    higher-ranked adopter of a kind that may adopt it (module docstring). ``intervals`` are the clamped start,
    end and rank per span."""
    low, high, rank = intervals
    wrappers = np.flatnonzero(adopters.wrapper | adopters.detached | adopters.finished)
    siblings = np.flatnonzero(candidate & np.isin(parent, parent[wrappers]))
    if not wrappers.size or not siblings.size:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    # A contained sibling starts within the wrapper's interval, give or take the overhang CONTAINED_SHARE allows
    # (under a quarter of the wrapper's length).
    slack = (high[wrappers] - low[wrappers]) // 4
    pair_wrapper, pair_sibling = siblings_starting_in(
        (trace, parent, low), siblings, wrappers, (low[wrappers] - slack, high[wrappers]), closed=True
    )
    length = high[pair_sibling] - low[pair_sibling]
    covered = np.minimum(high[pair_sibling], high[pair_wrapper]) - np.maximum(low[pair_sibling], low[pair_wrapper])
    inside = (rank[pair_wrapper] < rank[pair_sibling]) & (length > 0) & (covered >= CONTAINED_SHARE * length)
    by_wrapper = adopters.wrapper[pair_wrapper]
    by_detached = adopters.detached[pair_wrapper] & request[pair_sibling]
    after_request = adopters.finished[pair_wrapper] & ~request[pair_sibling]
    after_request &= low[pair_sibling] >= adopters.request_end[pair_wrapper]
    inside &= by_wrapper | by_detached | after_request
    pair_wrapper, pair_sibling, covered = pair_wrapper[inside], pair_sibling[inside], covered[inside]
    if not pair_sibling.size:
        return pair_sibling, pair_wrapper
    # Best wrapper per sibling: most covered, then longest, then earliest start, then lowest index.
    wrapper_length = high[pair_wrapper] - low[pair_wrapper]
    best = np.lexsort((pair_wrapper, low[pair_wrapper], -wrapper_length, -covered, pair_sibling))
    pair_sibling, pair_wrapper = pair_sibling[best], pair_wrapper[best]
    first_of = np.r_[True, pair_sibling[1:] != pair_sibling[:-1]]
    return pair_sibling[first_of], pair_wrapper[first_of]
