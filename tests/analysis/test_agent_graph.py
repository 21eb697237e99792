"""The agent graph (``analysis.agent_graph``) of traces written by real agent frameworks and instrumentations.

Each library's capture (``tests/realworld/captures/<driver>``, engine spans on: every model call has vLLM's
``llm_request`` below it) goes through the real importer into chDB and is read back; the first trace's graph
must show its agent (by the library's own agent spans, or the service where none is marked) calling the model and
both of the support agent's tools, each model call counted once (the engine span below a client call is the same
call), and no agent calling itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from analysis.agent_graph import EDGE_SCHEMA
from analysis.stage_rules import load_stage_rules
from instrumented_stack.realclients.common import TOOL_DESCRIPTIONS
from query.trace_model import build_trace_view
from testkit import import_first_trace, migrated_database

CAPTURES = Path(__file__).resolve().parents[1] / "realworld" / "captures"
AGENTS = {
    "openai_agents": ("agent", "support_agent"),
    "strands": ("agent", "support_agent"),
    "pydantic_ai": ("agent", "support_agent"),
    "google_adk": ("agent", "support_agent"),
    "semantic_kernel": ("agent", "support_agent"),
    "langgraph": ("agent", "LangGraph"),
    "openinference_openai": ("agent", "realclient-openinference_openai"),
    "openllmetry_openai": ("agent", "realclient-openllmetry_openai"),
}
"""Per library, the node that calls the model and the tools: an agent span's name (GenAI ``invoke_agent``,
OpenInference ``AGENT``), or the root service standing for a loop no span marks as an agent."""


@pytest.fixture(scope="module")
def graphs(chdb_dsn: str) -> Iterator[dict[str, pl.DataFrame]]:
    with migrated_database(chdb_dsn, "agent_graph") as ch:
        graphs = {}
        for driver in AGENTS:
            spans = import_first_trace(ch, CAPTURES / driver / "engine-on-nostream.json")
            graphs[driver] = build_trace_view(str(spans["trace_id"][0]), spans, load_stage_rules()).agent_graph
        yield graphs


@pytest.mark.parametrize("driver", sorted(AGENTS))
def test_the_agent_calls_the_model_and_its_tools(graphs: dict[str, pl.DataFrame], driver: str) -> None:
    edges = graphs[driver]
    assert edges.schema == pl.Schema(EDGE_SCHEMA)
    kind, agent = AGENTS[driver]
    mine = edges.filter(pl.col("source_kind") == kind, pl.col("source") == agent)
    models = mine.filter(pl.col("target_kind") == "model")
    assert models.height == 1 and models["target"][0].endswith("Llama-3.1-8B-Instruct"), edges
    assert models["calls"][0] >= 2  # a tool round and the answer, each one call however many spans it has
    tools = mine.filter(pl.col("target_kind") == "tool")
    assert sorted(name.removeprefix("support-") for name in tools["target"]) == sorted(TOOL_DESCRIPTIONS)
    assert (tools["calls"] >= 1).all()
    assert not edges.filter(pl.col("source") == pl.col("target")).height
    assert (edges["critical_ns"] <= edges["duration_ns"]).all() and (edges["duration_ns"] > 0).all()
    assert (models["critical_ns"] > 0).all()  # the answer waits on the model
