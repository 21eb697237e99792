"""Spans to stages: the rule table applied to every span, and each span tiled into stage pieces.

:func:`assign_stages` gives every span the stage of the first rule of a :class:`~analysis.stage_rules.
StageRules` table that matches it, its ``declared`` rules tried first (``other`` when none does). Rules are
evaluated once per distinct combination of the inputs they read (name, service, kind, whether the span has
children, the attribute values named by some rule), not once per span. Refinements follow the tree:

- an **LLM call** that no declared rule makes (a span named ``call_llm``) with a declared LLM call of its own
  service below it, and none above it, is that call's caller, not a second call: the table's
  ``llm_caller_stage`` (or ``other``);
- an **LLM call** (a rule with ``split: first_token``) with a SERVER span below it is *traced*: the model
  server's spans carry the inference, and the call's own time gets the rule's ``traced_stage`` (the hop);
- a span of a ``transport`` rule (an HTTP or RPC client request) below an LLM call *carries* the nearest
  enclosing call: it takes the call's stage, and its pieces are the call's pieces cut to its own interval, so
  its own time is the call's time (split at the same first token when the call is);
- an LLM call's time before the first request carrying it starts (its earliest carrying span, or its earliest
  request event, :func:`analysis.genai.request_start_ns`) is its caller's preparation (building the request,
  the SDK's start-up), the rule's ``prepare_stage``;
- a span no rule matches below a span of one of the table's ``step_stages`` (tool, retrieval) is part of that
  step (the servers an MCP tool call reaches, a search backend) and takes its stage;
- else, when the nearest span above it (as the spans report it) that a rule matched is of one of the table's
  ``same_service_stages`` (agent) and of its own service, it is part of that span's work (an agent loop's
  bookkeeping: persisting its conversation, reading its settings); below a model call or other work it is not;
- else, with an LLM call of its own service below it, it is that call's caller: the table's
  ``llm_caller_stage`` (``agent``: the application orchestrating model calls).

:func:`stage_pieces` tiles each span's interval into pieces with one stage each: one piece for an ordinary
span; the five phases of :mod:`analysis.vllm` for a span whose rule says ``split: vllm`` and that carries
the latency attributes; ``llm.first_token`` then ``llm.stream`` for an untraced LLM call whose first token is
known (:func:`analysis.genai.first_token_ns`); the call's pieces for a span carrying a call. The
decompositions intersect these pieces with the time a span is credited with, so a split span's share goes to
its phases in proportion to where that time lies.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from analysis import ancestry, vllm
from analysis.ancestry import BoolArray, IntArray
from analysis.genai import event_columns, first_token_ns, request_start_ns
from analysis.spans import attribute
from analysis.stage_rules import (
    DEFAULT_STAGE,
    STAGES,
    SpanMatch,
    StageRules,
    glob_regex,
    load_stage_rules,
    stage_series,
)
from analysis.tree import SpanTree, as_tree

_NO_RULE = -1
NO_SPLIT, VLLM_SPLIT, FIRST_TOKEN_SPLIT = range(3)
"""Codes of :attr:`Assignment.split`."""
FIRST_TOKEN_PHASES = ("llm.first_token", "llm.stream")
"""The stages an untraced LLM call with a known first token is tiled into, in time order."""
_SERVER_KINDS = ("Server",)


@dataclass(frozen=True)
class Pieces:
    """Stage pieces as aligned arrays; per span they tile its raw interval in time order.

    Attributes:
        span: index of the span (into ``SpanTree.spans``), ascending.
        stage: index into :data:`~analysis.stage_rules.STAGES`.
        start_ns, end_ns: the piece, Int64 ns since the epoch (``end_ns >= start_ns``).
        offsets: per span ``i``, its pieces are ``[offsets[i], offsets[i + 1])`` (length ``tree.size + 1``).
        tiled: indices of the spans whose pieces are not one piece of their assigned stage (split into vLLM
            phases or at the first token, or carrying such a call).
    """

    span: IntArray
    stage: IntArray
    start_ns: IntArray
    end_ns: IntArray
    offsets: IntArray
    tiled: IntArray

    def cut(self, span: IntArray, start: IntArray, end: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        """Intervals of spans (``span[i]``'s ``[start[i], end[i])``) cut at their span's piece boundaries.

        Returns (interval index, stage, start, end) per part, in interval order. An interval overlapping no
        piece with positive length (zero-length, or lying outside its span) is one part with the stage of the
        last piece starting at or before it (else the first piece). Per interval the parts sum to its length.
        """
        count = (self.offsets[span + 1] - self.offsets[span]).astype(np.int64)
        which = np.repeat(np.arange(span.size), count)
        piece = self.offsets[span][which] + (np.arange(which.size) - np.repeat(np.cumsum(count) - count, count))
        low = np.maximum(start[which], self.start_ns[piece])
        high = np.minimum(end[which], self.end_ns[piece])
        positive = high > low
        lone = np.bincount(which, weights=positive, minlength=span.size) == 0
        started = np.bincount(which, weights=self.start_ns[piece] <= start[which], minlength=span.size)
        fallback = self.offsets[span] + np.clip(started.astype(np.int64) - 1, 0, count - 1)
        parts = np.concatenate([which[positive], np.flatnonzero(lone)])
        stage = np.concatenate([self.stage[piece[positive]], self.stage[fallback[lone]]])
        part_start = np.concatenate([low[positive], start[lone]])
        part_end = np.concatenate([high[positive], end[lone]])
        order = np.argsort(parts, kind="stable")
        return parts[order], stage[order], part_start[order], part_end[order]


@dataclass(frozen=True)
class Assignment:
    """Per span (aligned with ``SpanTree.spans``): the matching rule's index (-1: none), its stage index into
    :data:`~analysis.stage_rules.STAGES` (refined as the module docstring says), how it is split
    (:data:`NO_SPLIT`, :data:`VLLM_SPLIT`, :data:`FIRST_TOKEN_SPLIT`), for a span carrying an LLM call
    the index of that call (-1 elsewhere), and whether its rule makes it an LLM call (traced or not;
    a span carrying another call is not one itself)."""

    rule: IntArray
    stage: IntArray
    split: IntArray
    carried_call: IntArray
    call: BoolArray
    prepare_stage: IntArray

    @property
    def llm_call(self) -> BoolArray:
        """Spans that are LLM calls whose inside is not traced."""
        return self.split == FIRST_TOKEN_SPLIT


@dataclass(frozen=True)
class RuleMatch:
    """What the rule table says of each span on its own (aligned with ``SpanTree.spans``), before the tree
    refines it (:func:`refine`): the matching rule's index (-1: none), its stage, split mode and
    ``traced_stage`` (stage indices; the rule's stage where it names no traced stage), whether the rule is a
    ``transport`` rule, and its ``prepare_stage`` (-1 where it names none). An LLM call that yields to a
    declared call below it (module docstring) is already its caller here, so the adjusters see one call."""

    rule: IntArray
    stage: IntArray
    split: IntArray
    traced_stage: IntArray
    transport: BoolArray
    prepare_stage: IntArray
    llm_caller_stage: int
    step_stages: IntArray
    same_service_stages: IntArray

    @property
    def call(self) -> BoolArray:
        """Spans an LLM-call rule matches (``split: first_token``)."""
        return self.split == FIRST_TOKEN_SPLIT

    @property
    def stream_reader(self) -> BoolArray:
        """Spans that read a call's stream and are no call: an unsplit rule's ``llm.stream`` (the Codex CLI's
        ``receiving_stream`` beside its request span)."""
        return (self.stage == STAGES.index(FIRST_TOKEN_PHASES[1])) & (self.split == NO_SPLIT)


def match_rules(tree: SpanTree, rules: StageRules | None = None) -> RuleMatch:
    """Apply ``rules`` (default: the packaged table) to every span of ``tree`` on its own."""
    table = rules if rules is not None else load_stage_rules()
    has_children = np.zeros(tree.size, dtype=bool)
    has_children[tree.parent[tree.parent >= 0]] = True
    presence_only = _presence_only_keys(table)
    inputs = tree.spans.select(
        "name",
        "service_name",
        "kind",
        pl.Series("has_children", has_children),
        *(
            (pl.col("attributes").map.contains_key(key) if key in presence_only else attribute(key)).alias(
                _attribute_column(key)
            )
            for key in table.attribute_keys
        ),
    )
    # Rules only see these inputs, so each distinct combination is decided once.
    distinct = inputs.with_row_index("row").group_by(pl.all().exclude("row")).agg("row")
    hits = (_rule_hit(i, table.rules[i].match, presence_only) for i in table.precedence)
    decided = distinct.select("row", pl.coalesce(hits).alias("rule")).explode("row")
    rule = np.full(tree.size, _NO_RULE, dtype=np.int64)
    rule[decided["row"].to_numpy()] = decided["rule"].fill_null(_NO_RULE).to_numpy()
    codes = {None: NO_SPLIT, "vllm": VLLM_SPLIT, "first_token": FIRST_TOKEN_SPLIT}
    stage_of = np.array([STAGES.index(r.stage) for r in table.rules] + [STAGES.index(DEFAULT_STAGE)])
    split_of = np.array([codes[r.split] for r in table.rules] + [NO_SPLIT])
    traced_of = np.array([STAGES.index(r.traced_stage or r.stage) for r in table.rules] + [0])
    transport_of = np.array([r.transport for r in table.rules] + [False])
    declared_of = np.array([r.declared for r in table.rules] + [False])
    prepare_of = np.array([STAGES.index(r.prepare_stage) if r.prepare_stage else -1 for r in table.rules] + [-1])
    caller = STAGES.index(table.llm_caller_stage) if table.llm_caller_stage else -1
    stage, split = stage_of[rule], split_of[rule]
    yields = _yielding_calls(tree, split == FIRST_TOKEN_SPLIT, declared_of[rule])
    stage[yields] = caller if caller >= 0 else STAGES.index(DEFAULT_STAGE)
    split[yields] = NO_SPLIT
    steps = np.array([STAGES.index(name) for name in table.step_stages], dtype=np.int64)
    owners = np.array([STAGES.index(name) for name in table.same_service_stages], dtype=np.int64)
    return RuleMatch(
        rule,
        stage,
        split,
        traced_of[rule],
        transport_of[rule],
        prepare_of[rule],
        caller,
        steps,
        owners,
    )


def refine(tree: SpanTree, matched: RuleMatch) -> Assignment:
    """The stage assignment of ``tree``'s spans: ``matched`` refined by the tree (module docstring). ``tree``
    may be an adjusted tree (:mod:`analysis.wrappers`) of the one ``matched`` was computed on."""
    stage, split = matched.stage.copy(), matched.split.copy()
    call = matched.call.copy()
    server = np.flatnonzero(tree.spans["kind"].is_in(_SERVER_KINDS).to_numpy())
    traced = _enclosing(tree, call, server)
    stage[traced] = matched.traced_stage[traced]
    split[traced] = NO_SPLIT

    # A transport span carries its nearest enclosing call.
    enclosing = ancestry.nearest_flagged(tree.parent, tree.depth, call)
    above = np.where(tree.parent >= 0, enclosing[np.maximum(tree.parent, 0)], -1)
    carries = matched.transport & (above >= 0)
    carried_call = np.where(carries, above, -1)
    stage[carries] = stage[above[carries]]
    split[carries] = NO_SPLIT
    call[carries] = False

    # A span no rule matched is part of the step (tool, retrieval) it serves, else of the agent span of its own
    # service above it, else the caller of an LLM call of its own service below it.
    unmatched = matched.rule == _NO_RULE
    if matched.step_stages.size:
        step = ancestry.nearest_flagged(tree.parent, tree.depth, np.isin(stage, matched.step_stages))
        served = unmatched & (step >= 0)
        stage[served] = stage[step[served]]
        unmatched &= ~served
    service = tree.spans["service_name"].to_numpy()
    if matched.same_service_stages.size:
        # The nearest span a rule matched above it as the spans report it (an adjuster may have put the span under
        # a call it ran beside): an agent span owns it, a model call or other work does not.
        reported, depth = tree.parent, tree.depth
        if tree.reported_parent is not None:
            reported = tree.reported_parent
            depth, _ = ancestry.depths_and_roots(reported)
        owner = ancestry.nearest_flagged(reported, depth, matched.rule != _NO_RULE)
        owned = unmatched & (owner >= 0)
        owned[owned] = np.isin(stage[owner[owned]], matched.same_service_stages) & (
            service[owned] == service[owner[owned]]
        )
        stage[owned] = stage[owner[owned]]
        unmatched &= ~owned
    if matched.llm_caller_stage >= 0:
        calls = np.flatnonzero(call)
        callers = np.zeros(tree.size, dtype=bool)
        reached = tree.parent[calls]
        owner = service[calls]
        while (keep := reached >= 0).any():
            reached, owner = reached[keep], owner[keep]
            same = service[reached] == owner
            reached, owner = reached[same], owner[same]
            fresh = ~callers[reached]
            callers[reached] = True
            reached, owner = tree.parent[reached[fresh]], owner[fresh]
        stage[callers & unmatched] = matched.llm_caller_stage
    return Assignment(matched.rule, stage, split, carried_call, call, matched.prepare_stage)


def classify(tree: SpanTree, rules: StageRules | None = None) -> Assignment:
    """Apply ``rules`` (default: the packaged table) to every span of ``tree`` and refine by the tree (no
    adjuster: :class:`analysis.trace_analysis.TraceAnalysis` adjusts the tree between the two steps)."""
    return refine(tree, match_rules(tree, rules))


def _yielding_calls(tree: SpanTree, call: BoolArray, declared: BoolArray) -> BoolArray:
    """LLM calls no declared rule made with a declared call of their own service below them and none above them
    (module docstring): inside a declared call such a span is part of that call's work (the MCP sampling request
    that carries a ``chat`` call to the client's model), and stays a call."""
    service = tree.spans["service_name"].to_numpy()
    declared_calls = call & declared
    above = ancestry.nearest_flagged(tree.parent, tree.depth, declared_calls)
    outside = np.where(tree.parent >= 0, above[np.maximum(tree.parent, 0)], -1) < 0
    below = np.flatnonzero(declared_calls)
    yields = np.zeros(tree.size, dtype=bool)
    for name in np.unique(service[below]):
        of_service = service == name
        yields |= _enclosing(tree, call & ~declared & outside & of_service, below[service[below] == name])
    return yields


def _enclosing(tree: SpanTree, flagged: BoolArray, below: IntArray) -> BoolArray:
    """Spans of ``flagged`` with a span of ``below`` (indices) among their descendants (every flagged ancestor of
    such a span, not only the nearest)."""
    nearest = ancestry.nearest_flagged(tree.parent, tree.depth, flagged)
    found = np.zeros(tree.size, dtype=bool)
    below = below[tree.parent[below] >= 0]
    reached = nearest[tree.parent[below]]
    while (reached := np.unique(reached[reached >= 0])).size:
        reached = reached[~found[reached]]
        found[reached] = True
        reached = np.where(tree.parent[reached] >= 0, nearest[np.maximum(tree.parent[reached], 0)], -1)
    return found


def _attribute_column(key: str) -> str:
    return f"attribute:{key}"


def _presence_only_keys(table: StageRules) -> set[str]:
    """Attribute keys every rule tests only for presence (glob ``*``): reading their values is unnecessary,
    and would make every span distinct for keys such as vLLM's latencies."""
    tested = [(key, globs) for rule in table.rules for key, globs in (rule.match.attributes or {}).items()]
    return {key for key, _ in tested} - {key for key, globs in tested if globs != ["*"]}


def _rule_hit(index: int, match: SpanMatch, presence_only: set[str]) -> pl.Expr:
    conditions: list[pl.Expr] = []
    if match.name:
        conditions.append(pl.col("name").str.contains(glob_regex(match.name)))
    if match.name_regex:
        conditions.append(pl.col("name").str.contains(match.name_regex))
    if match.service:
        conditions.append(pl.col("service_name").str.contains(glob_regex(match.service)))
    if match.kind:
        conditions.append(pl.col("kind").is_in(match.kind))
    for key, globs in (match.attributes or {}).items():
        column = pl.col(_attribute_column(key))
        conditions.append(column if key in presence_only else column.str.contains(glob_regex(globs)))
    if match.has_children is not None:
        conditions.append(pl.col("has_children") == match.has_children)
    return pl.when(pl.all_horizontal(conditions).fill_null(False)).then(pl.lit(index, dtype=pl.Int64))


Split = tuple[IntArray, list[IntArray], IntArray]
"""Spans tiled by their own boundaries: (span indices, inner boundaries as arrays aligned with them, stage index
per span and piece: shape (spans, len(inner) + 1))."""


def _own_boundaries(tree: SpanTree, assignment: Assignment) -> list[Split]:
    """The spans split by their own attributes: vLLM spans (:func:`analysis.vllm.phase_boundaries`), and LLM
    calls at the start of the request carrying them (the time before it is the caller's preparation, the call's
    ``prepare_stage``) and, untraced, at their first token (:func:`analysis.genai.first_token_ns`)."""
    needed = tree.spans.select("start_time_unix_nano", "end_time_unix_nano", "attributes")
    vllm_spans = np.flatnonzero(assignment.split == VLLM_SPLIT)
    bounded = vllm.phase_boundaries(needed[vllm_spans].with_columns(pl.Series("index", vllm_spans)))
    bounded = bounded.filter(pl.col(vllm.BOUNDARIES[0]).is_not_null())
    vllm_index = bounded["index"].to_numpy().astype(np.int64)
    splits: list[Split] = [
        (
            vllm_index,
            [bounded[name].to_numpy() for name in vllm.BOUNDARIES],
            np.tile([STAGES.index(phase) for phase in vllm.PHASES], (vllm_index.size, 1)),
        )
    ]

    calls = np.flatnonzero(assignment.call)
    call_frame = tree.spans[calls].select(*needed.columns, *event_columns(tree.spans))
    first_series = first_token_ns(call_frame)
    first = first_series.fill_null(0).to_numpy().astype(np.int64)
    first_known = first_series.is_not_null().to_numpy() & (assignment.split[calls] == FIRST_TOKEN_SPLIT)
    carriers = np.flatnonzero(assignment.carried_call >= 0)
    never = np.iinfo(np.int64).max
    request = np.full(tree.size, never, dtype=np.int64)
    np.minimum.at(request, assignment.carried_call[carriers], tree.start_ns[carriers])
    request[calls] = np.minimum(request[calls], request_start_ns(call_frame).fill_null(never).to_numpy())
    prepares = (assignment.prepare_stage[calls] >= 0) & (request[calls] > tree.start_ns[calls])
    # A request that starts after the call's first token is not the one that produced it: no preparation then.
    prepares &= (request[calls] < never) & (~first_known | (request[calls] <= first))
    first_token, stream = (STAGES.index(phase) for phase in FIRST_TOKEN_PHASES)
    for with_first in (True, False):
        for with_prepare in (True, False):
            chosen = (first_known == with_first) & (prepares == with_prepare)
            if not (with_first or with_prepare) or not chosen.any():
                continue
            spans = calls[chosen]
            inner, stages = [], []
            if with_prepare:
                inner.append(request[spans])
                stages.append(assignment.prepare_stage[spans])
            if with_first:
                inner.append(first[chosen])
                stages += [np.full(spans.size, first_token), np.full(spans.size, stream)]
            else:
                stages.append(assignment.stage[spans])
            splits.append((spans, inner, np.column_stack(stages)))
    return splits


def pieces(tree: SpanTree, assignment: Assignment, own: tuple[IntArray, IntArray] | None = None) -> Pieces:
    """Tile every span into stage pieces (see the module docstring).

    ``own`` is, per span, the interval its own time lies in (``(start_ns, end_ns)``, ns since the epoch, inside the
    span's interval in ``tree``; default the span's interval): a span's pieces are laid out on it, from its own
    start (a model call's first token is its delay after the call's own start), and the rest of the span's interval
    in ``tree`` is :data:`~analysis.stage_rules.DEFAULT_STAGE` (``other``: time no span of the trace describes, such
    as an envelope window's gaps around a span promoted to be the request's root, :mod:`analysis.request_window`).
    """
    if own is None:
        return _tiled(tree, assignment)
    own_start, own_end = own
    before = np.flatnonzero(own_start > tree.start_ns)
    after = np.flatnonzero(own_end < tree.end_ns)
    if not (before.size or after.size):
        return _tiled(tree, assignment)
    owned = tree.spans.with_columns(
        pl.Series("start_time_unix_nano", own_start), pl.Series("end_time_unix_nano", own_end)
    )
    inside = _tiled(replace(tree, spans=owned, start_ns=own_start, end_ns=own_end), assignment)
    # Each span's own pieces, with the stretches of its interval before and after its own time, by (span, start):
    # a stable sort, so a span's own zero-length piece stays before the stretch starting where it is.
    span = np.concatenate([inside.span, before, after])
    stage = np.concatenate([inside.stage, np.full(before.size + after.size, STAGES.index(DEFAULT_STAGE))])
    start = np.concatenate([inside.start_ns, tree.start_ns[before], own_end[after]])
    end = np.concatenate([inside.end_ns, own_start[before], tree.end_ns[after]])
    order = np.lexsort((start, span))
    offsets = np.searchsorted(span[order], np.arange(tree.size + 1))
    tiled = np.union1d(inside.tiled, np.r_[before, after]).astype(np.int64)
    return Pieces(span[order], stage[order], start[order], end[order], offsets, tiled)


def _tiled(tree: SpanTree, assignment: Assignment) -> Pieces:
    """Every span of ``tree`` tiled into stage pieces over its interval in ``tree``."""
    splits = _own_boundaries(tree, assignment)
    count = np.ones(tree.size, dtype=np.int64)
    for spans, inner, _ in splits:
        count[spans] = len(inner) + 1
    # Spans carrying a call take the call's pieces cut to their own interval.
    carriers = np.flatnonzero(assignment.carried_call >= 0)
    owner = assignment.carried_call[carriers]
    owner_offsets = np.r_[0, np.cumsum(count)]
    owner_span = np.repeat(np.arange(tree.size), count)
    owner_pieces = _layout(tree, assignment, splits, count, owner_offsets)
    carried = Pieces(owner_span, owner_pieces[0], owner_pieces[1], owner_pieces[2], owner_offsets, np.empty(0))
    which, stage, start, end = carried.cut(owner, tree.start_ns[carriers], tree.end_ns[carriers])
    whole = np.ones(tree.size, dtype=bool)
    whole[carriers] = False

    # Final layout: every non-carrier span's own pieces, then the carriers' cut pieces, sorted by (span, start).
    own = whole[owner_span]
    span = np.concatenate([owner_span[own], carriers[which]])
    piece_stage = np.concatenate([owner_pieces[0][own], stage])
    piece_start = np.concatenate([owner_pieces[1][own], start])
    piece_end = np.concatenate([owner_pieces[2][own], end])
    order = np.lexsort((piece_start, span))
    span, piece_stage, piece_start, piece_end = span[order], piece_stage[order], piece_start[order], piece_end[order]
    offsets = np.searchsorted(span, np.arange(tree.size + 1))
    tiled_own = np.concatenate([spans for spans, _, _ in splits])
    tiled_carriers = carriers[np.isin(owner, tiled_own)]
    tiled = np.unique(np.concatenate([tiled_own, tiled_carriers])).astype(np.int64)
    return Pieces(span, piece_stage, piece_start, piece_end, offsets, tiled)


def _layout(
    tree: SpanTree, assignment: Assignment, splits: list[Split], count: IntArray, offsets: IntArray
) -> tuple[IntArray, IntArray, IntArray]:
    """(stage, start, end) of every span's own pieces, laid out at ``offsets`` in span order."""
    total = int(count.sum())
    stage, start, end = np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64), np.empty(total, np.int64)
    single = np.flatnonzero(count == 1)
    at = offsets[single]
    stage[at], start[at], end[at] = assignment.stage[single], tree.start_ns[single], tree.end_ns[single]
    for spans, inner, stages in splits:
        if not spans.size:
            continue
        edges = np.column_stack([tree.start_ns[spans], *inner, tree.end_ns[spans]]).astype(np.int64)
        # Boundaries stay inside the span and in order, so the pieces tile it exactly.
        edges = np.maximum.accumulate(np.clip(edges, tree.start_ns[spans, None], tree.end_ns[spans, None]), axis=1)
        at = (offsets[spans][:, None] + np.arange(stages.shape[1])).ravel()
        stage[at] = stages.ravel()
        start[at], end[at] = edges[:, :-1].ravel(), edges[:, 1:].ravel()
    return stage, start, end


def assign_stages(spans: pl.DataFrame | SpanTree, rules: StageRules | None = None) -> pl.DataFrame:
    """The stage of every span.

    Args:
        spans: a span frame (contract in :mod:`analysis.spans`) or its :class:`~analysis.tree.SpanTree`.
        rules: the rule table; default the packaged one (:func:`~analysis.stage_rules.load_stage_rules`).

    Returns:
        One row per span in ``SpanTree.spans`` order: trace_id, span_id (String); stage
        (:data:`~analysis.stage_rules.STAGE_DTYPE`; a split span shows its rule's fallback stage, see
        :func:`stage_pieces` for its phases; a traced LLM call its ``traced_stage``; a span carrying a call
        the call's stage); rule_index (Int64, position of the deciding rule in the table, null
        when no rule matched); split (Boolean, the span is split by its own attributes: vLLM phases or an
        untraced LLM call's first token); llm_call (Boolean, an LLM call whose inside is not traced).
    """
    tree = as_tree(spans)
    assignment = classify(tree, rules)
    return pl.DataFrame(
        {
            "trace_id": tree.spans["trace_id"],
            "span_id": tree.spans["span_id"],
            "stage": stage_series(assignment.stage),
            "rule_index": pl.Series(assignment.rule).set(pl.Series(assignment.rule == _NO_RULE), None),
            "split": assignment.split != NO_SPLIT,
            "llm_call": assignment.llm_call,
        }
    )


def stage_pieces(spans: pl.DataFrame | SpanTree, rules: StageRules | None = None) -> pl.DataFrame:
    """Every span tiled into stage pieces (vLLM spans into their phases, untraced LLM calls at their first
    token, spans carrying such a call like the call).

    Returns:
        trace_id, span_id (String); stage (:data:`~analysis.stage_rules.STAGE_DTYPE`); start_ns, end_ns,
        duration_ns (Int64 ns). Per span the pieces are in time order and their durations sum to the
        span's duration; zero-length phases of a split span are kept so every vLLM span has all five and
        every first-token split both.
    """
    tree = as_tree(spans)
    tiled = pieces(tree, classify(tree, rules))
    return pl.DataFrame(
        {
            "trace_id": tree.spans["trace_id"].gather(tiled.span),
            "span_id": tree.spans["span_id"].gather(tiled.span),
            "stage": stage_series(tiled.stage),
            "start_ns": tiled.start_ns,
            "end_ns": tiled.end_ns,
            "duration_ns": tiled.end_ns - tiled.start_ns,
        }
    )
