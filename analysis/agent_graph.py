"""A trace's agent graph: which agent called which model, tool, retriever or agent, how often and for how long.

Langfuse draws one per trace ("agent graphs") and Jaeger users ask for it (jaeger#8416): the work of an agent run
seen as who called what rather than as a timeline. Nodes are of four kinds:

- **agent**: a span an instrumentation marks as an agent run (:data:`AGENT_MARKERS`: GenAI semconv's
  ``invoke_agent`` / ``create_agent`` operation, OpenInference's ``AGENT`` span kind, OpenLLMetry's ``agent``,
  Langfuse's ``agent`` observation), named by ``gen_ai.agent.name`` or the span's name. Where no span is marked,
  the trace's root stands for the agent, named by its service (a hand-written loop is still an agent).
- **model**: an outermost model call (:func:`analysis.model_calls.model_calls`: a client span and the engine's
  span below it are one call), named by its model.
- **tool** / **retrieval**: an outermost span the stage rules put in that stage (a tool's own HTTP call below it
  is part of it), named by ``gen_ai.tool.name`` / OpenInference's ``tool.name`` / OpenLLMetry's
  ``traceloop.entity.name`` or the span's name.

Each is an edge from the nearest agent above it in the analysis tree (an agent inside an agent: an edge between
them); edges sum ``calls``, ``duration_ns`` (the spans' durations, which overlap when calls run in parallel),
``critical_ns`` (their time on the trace's critical path, ns, where the caller gives it) and ``errors``.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt
import polars as pl

from analysis import ancestry
from analysis.critical_path import own_critical_ns
from analysis.model_calls import model_calls
from analysis.spans import attribute
from analysis.stage_rules import STAGES
from analysis.trace_analysis import TraceAnalysis

AGENT_MARKERS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("gen_ai.operation.name", ("invoke_agent", "create_agent")),
    ("openinference.span.kind", ("AGENT",)),
    ("traceloop.span.kind", ("agent",)),
    ("langfuse.observation.type", ("agent",)),
)
"""``(attribute, values)`` that mark a span as an agent run: GenAI semantic conventions (``gen-ai-agent-spans.md``),
OpenInference, OpenLLMetry (Traceloop), Langfuse SDK v3."""
AGENT_NAME_KEYS: Final = ("gen_ai.agent.name", "agent.name", "traceloop.entity.name")
TOOL_NAME_KEYS: Final = ("gen_ai.tool.name", "tool.name", "traceloop.entity.name")
"""Attributes that name an agent or a tool (GenAI semconv, OpenInference, OpenLLMetry's entity name), tried in
order before the span name."""
UNKNOWN_MODEL: Final = "(model not reported)"

EDGE_SCHEMA: Final = {
    "source_kind": pl.String,
    "source": pl.String,
    "target_kind": pl.String,
    "target": pl.String,
    "calls": pl.Int64,
    "traces": pl.Int64,
    "duration_ns": pl.Int64,
    "critical_ns": pl.Int64,
    "errors": pl.Int64,
}

IntArray = npt.NDArray[np.int64]


def agent_graph(
    analysis: TraceAnalysis, critical_ns: IntArray | None = None, calls: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The agent graph of the traces in ``analysis`` (module docstring) as its edges, summed over them.

    Args:
        analysis: the analysis of one trace or many.
        critical_ns: per span of ``analysis.tree`` (aligned), its own ns on its trace's critical path (inside its
            interval), as :func:`own_critical_ns` gives it; an edge counts its targets' and everything below them.
            None: the critical path of each trace's request (``analysis.sections``).
        calls: ``model_calls(analysis)`` where the caller has it already; computed when None.

    Returns:
        One row per edge (:data:`EDGE_SCHEMA`; ``traces``: in how many of the traces it occurs), most
        ``duration_ns`` first; empty when no trace has a model call, tool, retrieval or nested agent.
    """
    tree = analysis.tree
    spans, parent, depth, size = tree.spans, tree.parent, tree.depth, tree.size
    if not size:
        return pl.DataFrame(schema=EDGE_SCHEMA)
    facts = spans.select(
        "trace_id",
        agent=pl.coalesce(*(attribute(key) for key in AGENT_NAME_KEYS), pl.col("name")),
        tool=pl.coalesce(*(attribute(key) for key in TOOL_NAME_KEYS), pl.col("name")),
        marked=pl.any_horizontal(
            *(attribute(key).is_in(list(values)).fill_null(False) for key, values in AGENT_MARKERS)
        ),
        error=(pl.col("status_code") == "Error").fill_null(False) if "status_code" in spans.columns else pl.lit(False),
    )
    agent = facts["marked"].to_numpy().copy()
    _, root = ancestry.depths_and_roots(parent)
    # A trace's root stands for what no marked agent is above: the agent itself where its trace marks none (a
    # hand-written loop), else the service the request entered.
    marks = np.zeros(size, dtype=bool)
    np.logical_or.at(marks, root, agent)
    roots = parent < 0
    agent_names = np.array(facts["agent"].to_list(), dtype=object)
    agent_names[roots] = spans["service_name"].to_numpy()[roots]
    agent |= roots
    above = np.maximum(parent, 0)
    while True:
        # The nearest agent strictly above each span (its trace's root above a root).
        caller = np.where(roots, root, ancestry.nearest_flagged(parent, depth, agent)[above])
        # An agent span directly inside a run of the same agent (a framework's nested span of one run) is that
        # run, not an agent it calls.
        repeated = agent & ~roots & (agent_names[caller] == agent_names)
        if not repeated.any():
            break
        agent &= ~repeated
    source_kind = np.where(roots & marks, "service", "agent")

    calls = (calls if calls is not None else model_calls(analysis)).filter(pl.col("outermost"))
    target_kind = np.full(size, "", dtype=object)
    target = np.array(facts["tool"].to_list(), dtype=object)
    model_index = calls["index"].to_numpy()
    target_kind[model_index] = "model"
    target[model_index] = np.array(calls["model"].fill_null(UNKNOWN_MODEL).to_list(), dtype=object)
    reported = analysis.reported_tree
    moved = reported.parent != parent
    for kind in ("tool", "retrieval"):
        flagged = analysis.assignment.stage == STAGES.index(kind)
        enclosing = np.where(roots, -1, ancestry.nearest_flagged(parent, depth, flagged)[above])
        # Outermost below its agent: a tool's own HTTP call is part of it, a tool of an agent run inside a tool
        # (an agent used as a tool) is that agent's.
        outermost = flagged & ((enclosing < 0) | (depth[np.maximum(enclosing, 0)] < depth[caller]))
        # A span the analysis moved (a tool server's span that outlived its client, lifted beside it) is still part
        # of the call that reports it: one tool call, not two.
        held = ancestry.nearest_flagged(reported.parent, reported.depth, flagged)[np.maximum(reported.parent, 0)]
        outermost &= ~(moved & (reported.parent >= 0) & (held >= 0))
        target_kind[outermost & (target_kind == "")] = kind
    nested = agent & ~roots
    target_kind[nested] = "agent"
    target[nested] = agent_names[nested]

    if critical_ns is None:
        critical_ns = own_critical_ns(analysis.sections, tree.start_ns, tree.end_ns)
    edges = pl.DataFrame(
        {
            "trace_id": facts["trace_id"],
            "source_kind": source_kind[caller],
            "source": agent_names[caller],
            "target_kind": target_kind,
            "target": target,
            "duration_ns": tree.end_ns - tree.start_ns,
            "critical_ns": ancestry.reduce_subtrees(parent, depth, [(critical_ns, np.add)])[0],
            "errors": facts["error"].cast(pl.Int64),
        },
        schema_overrides={"source_kind": pl.String, "source": pl.String, "target_kind": pl.String, "target": pl.String},
    ).filter(pl.col("target_kind") != "", pl.Series(caller != np.arange(size)))
    return (
        edges.group_by("source_kind", "source", "target_kind", "target")
        .agg(
            calls=pl.len().cast(pl.Int64),
            traces=pl.col("trace_id").n_unique().cast(pl.Int64),
            duration_ns=pl.col("duration_ns").sum(),
            critical_ns=pl.col("critical_ns").sum(),
            errors=pl.col("errors").sum(),
        )
        .select(list(EDGE_SCHEMA))
        .sort("duration_ns", "target", descending=[True, False])
    )
