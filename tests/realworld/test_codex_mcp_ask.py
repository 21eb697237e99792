"""An end-to-end ask of Hotspan's MCP server (issue 33) by a real coding agent: the Codex CLI
(``instrumented_stack.realclients.codex_cli``, skipped with the reason when it is not installed) asked "why is trace
<id> slow?" about a trace of the instrumented stack's ``queue_saturation`` run (``mcp_kit.fault_spans``), with the
served Hotspan's ``/mcp`` as its MCP server (Streamable HTTP, ``[mcp_servers.hotspan] url``) and the emulator's
Responses API as its model.

Codex 0.171 offers an MCP server's tools as one Responses API ``namespace`` tool (``mcp__hotspan``); the emulated
model calls each tool offered once, Hotspan's among them, filling ``trace_id`` arguments with the trace ID of the
question (``instrumented_stack.engine.tool_calls``), then answers. Codex's own JSON event stream (``codex exec
--json``: an ``mcp_tool_call`` item per call, with its arguments, status and result) shows every Hotspan tool called
and completed, and the call of ``explain_trace`` with that ID returning a result that names the trace's top stage
(from ``/api/v1/traces/{id}/stages``) and the cause ``/api/v1/diagnosis`` ranks first, the trace being one of that
finding's example requests. About half a minute: the stack run ~10 s, the Codex turn ~15-20 s.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cluster_kit import served_holding, wait_analysed
from mcp_kit import FAULT, fault_spans, list_tools, stages_ns
from opentelemetry.sdk.trace import SpanProcessor

from api.trace_text import ms
from hotspan.server import RunningServer
from instrumented_stack.realclients.cli_capture import cli_workspace
from instrumented_stack.realclients.codex_cli import MAX_MODEL_LEN, codex_config, exec_events, find_codex
from instrumented_stack.realclients.emulator import emulator_config, serve_emulator

SERVER = "hotspan"
TOOL = "explain_trace"


@pytest.fixture(scope="module")
def server(chdb_dsn: str, layout: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A served Hotspan without an auth file (the open ``default`` tenant on loopback) holding the fault run's
    spans, analysed by its trace pipeline."""
    spans = fault_spans()
    with served_holding(chdb_dsn, layout, tmp_path_factory.mktemp("codexmcp"), "codexmcp", spans) as running:
        wait_analysed(running, spans)
        yield running


def _ask(codex: str, server: RunningServer, question: str) -> list[dict[str, Any]]:
    """Codex's JSON events for one ``codex exec`` turn asking ``question``, with the served Hotspan's ``/mcp`` as
    its MCP server and the emulator (no spans of its own) as its model."""
    config = emulator_config(engine_spans=False).model_copy(update={"max_model_len": MAX_MODEL_LEN})
    with serve_emulator(config, SpanProcessor()) as llm_url, cli_workspace() as (work, home):
        mcp = {SERVER: f"{server.base_url}/mcp"}
        (home / "config.toml").write_text(codex_config(llm_url, mcp_servers=mcp), encoding="utf-8")
        return list(exec_events(codex, work, home, question))


def _result_text(item: dict[str, Any]) -> str:
    """The text blocks of an ``mcp_tool_call`` item's result, joined."""
    content = (item.get("result") or {}).get("content") or []
    return "\n".join(block.get("text", "") for block in content if block.get("type") == "text")


@pytest.mark.skipif(
    find_codex() is None, reason="the codex CLI is not installed (instrumented_stack.realclients.codex_cli)"
)
def test_codex_asked_why_a_trace_is_slow_gets_hotspans_explanation(server: RunningServer) -> None:
    codex = find_codex()
    assert codex is not None
    answer = httpx.get(f"{server.base_url}/api/v1/diagnosis", timeout=120)
    assert answer.status_code == 200, answer.text
    finding = answer.json()["findings"][0]
    assert finding["cause"] == FAULT
    trace_id = finding["evidence"]["example_trace_ids"][0]
    stages = stages_ns(server, trace_id)
    top = max(stages, key=stages.__getitem__)

    events = _ask(codex, server, f"Why is trace {trace_id} slow?")

    calls = [
        event["item"]
        for event in events
        if event.get("type") == "item.completed" and event["item"].get("type") == "mcp_tool_call"
    ]
    hotspans = [item for item in calls if item["server"] == SERVER]
    # Codex offered every Hotspan tool the SDK client lists, and each call of it came back completed.
    assert sorted(item["tool"] for item in hotspans) == sorted(tool.name for tool in list_tools(server.base_url)), (
        json.dumps(events)[-6000:]
    )
    assert all(item["status"] == "completed" for item in hotspans), hotspans
    call = next(item for item in hotspans if item["tool"] == TOOL)
    assert call["arguments"] == {"trace_id": trace_id}
    assert call["status"] == "completed" and not call.get("error"), call
    explanation = _result_text(call)
    assert explanation.startswith(f"Trace {trace_id}:"), explanation
    assert f"Top stage: {top}, {ms(stages[top])} ms" in explanation
    assert f"1. {FAULT} [" in explanation
    assert "one of the finding's example requests" in explanation
    assert events[-1]["type"] == "turn.completed"
