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
    "duration_ns": pl.Int64,
    "critical_ns": pl.Int64,
    "errors": pl.Int64,
}

IntArray = npt.NDArray[np.int64]


def agent_graph(analysis: TraceAnalysis, critical_ns: IntArray | None = None) -> pl.DataFrame:
    """The agent graph of the one trace in ``analysis`` (module docstring) as its edges.

    Args:
        analysis: one trace's analysis.
        critical_ns: per span of ``analysis.tree`` (aligned), its own ns on the trace's critical path (inside its
            interval); an edge counts its targets' and everything below them. Zeros when None.

    Returns:
        One row per edge (:data:`EDGE_SCHEMA`), most ``duration_ns`` first; empty when the trace has no model
        call, tool, retrieval or nested agent.
    """
    tree = analysis.tree
    spans, parent, depth, size = tree.spans, tree.parent, tree.depth, tree.size
    if not size:
        return pl.DataFrame(schema=EDGE_SCHEMA)
    facts = spans.select(
        agent=pl.coalesce(*(attribute(key) for key in AGENT_NAME_KEYS), pl.col("name")),
        tool=pl.coalesce(*(attribute(key) for key in TOOL_NAME_KEYS), pl.col("name")),
        marked=pl.any_horizontal(
            *(attribute(key).is_in(list(values)).fill_null(False) for key, values in AGENT_MARKERS)
        ),
        error=(pl.col("status_code") == "Error").fill_null(False) if "status_code" in spans.columns else pl.lit(False),
    )
    agent = facts["marked"].to_numpy().copy()
    agent_names = facts["agent"].to_list()
    root = int(np.flatnonzero(parent < 0)[0])
    # The root stands for what no marked agent is above: the agent itself where nothing is marked (a hand-written
    # loop), else the service the request entered.
    entry_kind = "service" if agent.any() else "agent"
    agent[root] = True
    agent_names[root] = str(spans["service_name"][root])
    above = np.maximum(parent, 0)
    while True:
        # The nearest agent strictly above each span (the root agent above a root).
        caller = np.where(parent >= 0, ancestry.nearest_flagged(parent, depth, agent)[above], root)
        # An agent span directly inside a run of the same agent (a framework's nested span of one run) is that
        # run, not an agent it calls.
        repeated = (
            agent & (parent >= 0) & (np.array(agent_names, dtype=object)[caller] == np.array(agent_names, dtype=object))
        )
        if not repeated.any():
            break
        agent &= ~repeated
    kinds = np.where(np.arange(size) == root, entry_kind, "agent")

    calls = model_calls(analysis).filter(pl.col("outermost"))
    targets: list[tuple[IntArray, str, list[str]]] = [
        (calls["index"].to_numpy(), "model", calls["model"].fill_null(UNKNOWN_MODEL).to_list())
    ]
    tool_names = facts["tool"].to_list()
    for kind in ("tool", "retrieval"):
        flagged = analysis.assignment.stage == STAGES.index(kind)
        enclosing = np.where(parent >= 0, ancestry.nearest_flagged(parent, depth, flagged)[above], -1)
        # Outermost below its agent: a tool's own HTTP call is part of it, a tool of an agent run inside a tool
        # (an agent used as a tool) is that agent's.
        outermost = flagged & ((enclosing < 0) | (depth[np.maximum(enclosing, 0)] < depth[caller]))
        index = np.flatnonzero(outermost)
        targets.append((index, kind, [tool_names[i] for i in index]))
    nested = np.flatnonzero(agent & (parent >= 0))
    targets.append((nested, "agent", [agent_names[i] for i in nested]))

    critical = _subtree_sums(parent, depth, critical_ns) if critical_ns is not None else np.zeros(size, np.int64)
    duration = tree.end_ns - tree.start_ns
    errors = facts["error"].to_numpy()
    rows = [
        (
            str(kinds[caller[span]]),
            agent_names[caller[span]],
            kind,
            str(label),
            1,
            int(duration[span]),
            int(critical[span]),
            int(errors[span]),
        )
        for index, kind, labels in targets
        for span, label in zip(index.tolist(), labels, strict=True)
        if caller[span] != span
    ]
    edges = pl.DataFrame(rows, schema=EDGE_SCHEMA, orient="row")
    return (
        edges.group_by("source_kind", "source", "target_kind", "target")
        .agg(pl.col("calls", "duration_ns", "critical_ns", "errors").sum())
        .sort("duration_ns", "target", descending=[True, False])
    )


def _subtree_sums(parent: IntArray, depth: IntArray, values: IntArray) -> IntArray:
    """Per span, ``values`` summed over the span and every span below it: deepest level first, each level
    added into its parents."""
    total = values.astype(np.int64).copy()
    for level in range(int(depth.max()), 0, -1):
        at = np.flatnonzero(depth == level)
        np.add.at(total, parent[at], total[at])
    return total
