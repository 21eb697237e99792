"""Spans to stages: the rule table applied to every span, and each span tiled into stage pieces.

:func:`assign_stages` gives every span the stage of the first rule of a :class:`~analysis.stage_rules.
StageRules` table that matches it (``other`` when none does). Rules are evaluated once per distinct
combination of the inputs they read (name, service, kind, whether the span has children, the attribute
values named by some rule), not once per span.

:func:`stage_pieces` tiles each span's interval into pieces with one stage each: one piece for an ordinary
span; the five phases of :mod:`analysis.vllm` for a span whose rule says ``split: vllm`` and that carries
the latency attributes. The decompositions intersect these pieces with the time a span is credited with,
so a split span's share goes to its phases in proportion to where that time lies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis import vllm
from analysis.ancestry import IntArray
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


@dataclass(frozen=True)
class Pieces:
    """Stage pieces as aligned arrays; per span they tile its raw interval in time order.

    Attributes:
        span: index of the span (into ``SpanTree.spans``), ascending.
        stage: index into :data:`~analysis.stage_rules.STAGES`.
        start_ns, end_ns: the piece, Int64 ns since the epoch (``end_ns >= start_ns``).
        tiled: indices of the spans tiled into the vLLM phases (:data:`analysis.vllm.PHASES`, one piece
            each); every other span is one piece of its assigned stage.
    """

    span: IntArray
    stage: IntArray
    start_ns: IntArray
    end_ns: IntArray
    tiled: IntArray


@dataclass(frozen=True)
class Assignment:
    """Per span (aligned with ``SpanTree.spans``): the matching rule's index (-1: none), its stage index
    into :data:`~analysis.stage_rules.STAGES`, and whether the rule asks for the vLLM split."""

    rule: IntArray
    stage: IntArray
    split: np.ndarray


def classify(tree: SpanTree, rules: StageRules | None = None) -> Assignment:
    """Apply ``rules`` (default: the packaged table) to every span of ``tree``."""
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
    decided = distinct.select(
        "row",
        pl.coalesce(_rule_hit(i, rule.match, presence_only) for i, rule in enumerate(table.rules)).alias("rule"),
    ).explode("row")
    rule = np.full(tree.size, _NO_RULE, dtype=np.int64)
    rule[decided["row"].to_numpy()] = decided["rule"].fill_null(_NO_RULE).to_numpy()
    rule_stage = np.array([STAGES.index(r.stage) for r in table.rules] + [STAGES.index(DEFAULT_STAGE)])
    rule_split = np.array([r.split == "vllm" for r in table.rules] + [False])
    return Assignment(rule, rule_stage[rule], rule_split[rule])


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


def pieces(tree: SpanTree, assignment: Assignment) -> Pieces:
    """Tile every span into stage pieces (see the module docstring)."""
    candidates = np.flatnonzero(assignment.split)
    needed = tree.spans.select("start_time_unix_nano", "end_time_unix_nano", "attributes")
    bounded = vllm.phase_boundaries(needed.filter(assignment.split).with_columns(pl.Series("index", candidates)))
    bounded = bounded.filter(pl.col(vllm.BOUNDARIES[0]).is_not_null())
    split = bounded["index"].to_numpy()
    whole = np.ones(tree.size, dtype=bool)
    whole[split] = False
    single = np.flatnonzero(whole)

    edges = np.column_stack(
        [tree.start_ns[split], *(bounded[name].to_numpy() for name in vllm.BOUNDARIES), tree.end_ns[split]]
    ).astype(np.int64)
    # Lay the pieces out in span order without sorting: each span's pieces start at its offset.
    phases = len(vllm.PHASES)
    count = np.ones(tree.size, dtype=np.int64)
    count[split] = phases
    offset = np.cumsum(count) - count
    total = int(count.sum())
    span, stage = np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64)
    start, end = np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64)
    at = offset[single]
    span[at], stage[at], start[at], end[at] = (
        single,
        assignment.stage[single],
        tree.start_ns[single],
        tree.end_ns[single],
    )
    at = (offset[split][:, None] + np.arange(phases)).ravel()
    span[at] = np.repeat(split, phases)
    stage[at] = np.tile([STAGES.index(phase) for phase in vllm.PHASES], split.size)
    start[at], end[at] = edges[:, :-1].ravel(), edges[:, 1:].ravel()
    return Pieces(span, stage, start, end, split)


def assign_stages(spans: pl.DataFrame | SpanTree, rules: StageRules | None = None) -> pl.DataFrame:
    """The stage of every span.

    Args:
        spans: a span frame (contract in :mod:`analysis.spans`) or its :class:`~analysis.tree.SpanTree`.
        rules: the rule table; default the packaged one (:func:`~analysis.stage_rules.load_stage_rules`).

    Returns:
        One row per span in ``SpanTree.spans`` order: trace_id, span_id (String); stage
        (:data:`~analysis.stage_rules.STAGE_DTYPE`; a split span shows its rule's fallback stage, see
        :func:`stage_pieces` for its phases); rule_index (Int64, position of the deciding rule in the
        table, null when no rule matched); split (Boolean, the rule asks for the vLLM split).
    """
    tree = as_tree(spans)
    assignment = classify(tree, rules)
    return pl.DataFrame(
        {
            "trace_id": tree.spans["trace_id"],
            "span_id": tree.spans["span_id"],
            "stage": stage_series(assignment.stage),
            "rule_index": pl.Series(assignment.rule).set(pl.Series(assignment.rule == _NO_RULE), None),
            "split": assignment.split,
        }
    )


def stage_pieces(spans: pl.DataFrame | SpanTree, rules: StageRules | None = None) -> pl.DataFrame:
    """Every span tiled into stage pieces (vLLM spans into their phases).

    Returns:
        trace_id, span_id (String); stage (:data:`~analysis.stage_rules.STAGE_DTYPE`); start_ns, end_ns,
        duration_ns (Int64 ns). Per span the pieces are in time order and their durations sum to the
        span's duration; zero-length phases are kept so every split span has all five.
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
