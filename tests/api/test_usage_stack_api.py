"""Token usage per model, and each trace's agent graph, over the demo's own data (issues 31 and 32): the
instrumented stack's spans, served.

In the stack the agent's ``chat`` span names the model and repeats the usage, and vLLM's ``llm_request`` below it
counts the same prompt and completion tokens without naming a model. Tokens are counted once per chain, on the
engine span; ``/api/v1/usage?group_by=model`` must still file them under the chain's model, not under none.

Input: four Azure conversation rows replayed closed-loop with two users through the five services in this
process (engine speed 20), posted as one OTLP/protobuf body to a served Hotspan.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from cluster_kit import served_holding, wait_analysed
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from hotspan.server import RunningServer
from instrumented_stack.capture import InMemorySpans
from instrumented_stack.loadgen import UserSettings, replay_closed_loop
from instrumented_stack.prompts import PromptBuilder
from instrumented_stack.runner import with_speed
from instrumented_stack.stack import Stack, StackConfig
from instrumented_stack.tokenizer import default_tokenizer
from instrumented_stack.workload import load_workload

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ROWS = 4


@pytest.fixture(scope="module")
def stack_spans() -> ExportTraceServiceRequest:
    """One clean stack run's spans as an OTLP export request."""
    config = with_speed(StackConfig(), 20.0)
    builder = PromptBuilder(default_tokenizer(), 7, {"catalogue": 2.0, "calculate": 1.0, "policy": 1.0})
    prompts = [builder.build(row) for row in load_workload("azure-conv", limit=ROWS)]
    spans = InMemorySpans()
    with Stack(config, spans) as stack:
        settings = UserSettings(tenants=config.credentials(("tenant-p0",)))
        outcomes = asyncio.run(replay_closed_loop(stack.gateway_url, prompts, settings, users=2))
    assert all(outcome.ok for outcome in outcomes), [o.error for o in outcomes if not o.ok]
    return encode_spans(spans.spans())


@pytest.fixture(scope="module")
def server(
    chdb_dsn: str, layout: str, tmp_path_factory: pytest.TempPathFactory, stack_spans: ExportTraceServiceRequest
) -> Iterator[RunningServer]:
    with served_holding(
        chdb_dsn, layout, tmp_path_factory.mktemp("stack_usage"), "stack_usage", stack_spans
    ) as running:
        yield running


def chat_usage(request: ExportTraceServiceRequest) -> tuple[int, int, int]:
    """The agent's model calls (``chat`` spans naming :data:`MODEL`): their count and the input and output tokens
    they carry, summed."""
    calls = input_tokens = output_tokens = 0
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                attributes = {a.key: a.value for a in span.attributes}
                if span.name.startswith("chat") and attributes["gen_ai.request.model"].string_value == MODEL:
                    calls += 1
                    input_tokens += attributes["gen_ai.usage.input_tokens"].int_value
                    output_tokens += attributes["gen_ai.usage.output_tokens"].int_value
    return calls, input_tokens, output_tokens


def test_usage_per_model_files_the_engine_counted_tokens_under_the_model(
    server: RunningServer, stack_spans: ExportTraceServiceRequest
) -> None:
    wait_analysed(server, stack_spans)
    calls, input_tokens, output_tokens = chat_usage(stack_spans)
    assert calls >= ROWS and input_tokens > 0 and output_tokens > 0
    answer = httpx.get(f"{server.base_url}/api/v1/usage", params={"start_ns": 0, "group_by": "model"}, timeout=30)
    assert answer.status_code == 200, answer.text
    groups = {g["group"]: g for g in answer.json()["groups"]}
    model = groups[MODEL]
    assert (model["llm_calls"], model["input_tokens"], model["output_tokens"]) == (calls, input_tokens, output_tokens)
    # No tokens are left under a missing model: every chain of the stack names one.
    assert "" not in groups, groups


def test_the_stacks_user_sessions_are_conversations(
    server: RunningServer, stack_spans: ExportTraceServiceRequest
) -> None:
    # The load generator names each tenant's requests in sessions of three (UserSettings.conversation_turns), the
    # agent puts it on its invoke_agent span (gen_ai.conversation.id): four requests of one tenant, two sessions.
    wait_analysed(server, stack_spans)
    answer = httpx.get(f"{server.base_url}/api/v1/conversations", params={"start_ns": 0}, timeout=30)
    assert answer.status_code == 200, answer.text
    rows = answer.json()["conversations"]
    assert sorted(row["turns"] for row in rows) == [1, 3]
    assert all(row["conversation_id"].split("-", 1)[1].startswith("tenant-p0-") for row in rows)
    _calls, input_tokens, output_tokens = chat_usage(stack_spans)
    assert sum(row["input_tokens"] for row in rows) == input_tokens
    assert sum(row["output_tokens"] for row in rows) == output_tokens
    longest = max(rows, key=lambda row: row["turns"])["conversation_id"]
    turns = httpx.get(f"{server.base_url}/api/v1/conversations/{longest}", timeout=30).json()["turns"]
    assert len(turns) == 3 and all(turn["stages_ns"]["llm.decode"] > 0 for turn in turns)


def stack_calls(request: ExportTraceServiceRequest) -> dict[str, tuple[str, int, Counter[str]]]:
    """Per trace (hex): its agent's name, its model calls (``chat`` spans naming :data:`MODEL`) and its tool calls
    (``execute_tool`` spans) by ``gen_ai.tool.name``, as the stack's spans report them."""
    found: dict[str, tuple[str, int, Counter[str]]] = {}
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                attributes = {a.key: a.value.string_value for a in span.attributes}
                agent, calls, tools = found.setdefault(span.trace_id.hex(), ("", 0, Counter()))
                if span.name.startswith("invoke_agent"):
                    agent = attributes["gen_ai.agent.name"]
                elif span.name.startswith("chat") and attributes.get("gen_ai.request.model") == MODEL:
                    calls += 1
                elif span.name.startswith("execute_tool"):
                    tools[attributes["gen_ai.tool.name"]] += 1
                found[span.trace_id.hex()] = (agent, calls, tools)
    return found


def test_each_stack_traces_agent_graph_shows_its_agent_models_and_tools(
    server: RunningServer, stack_spans: ExportTraceServiceRequest
) -> None:
    """``GET /api/v1/traces/{id}/agent-graph`` (issue 32): gateway → agent → model and tools, each call counted
    as the spans report it, with times; the critical path runs through the model calls."""
    wait_analysed(server, stack_spans)
    expected = stack_calls(stack_spans)
    assert sum(bool(tools) for _, _, tools in expected.values()) >= 1  # some request used a tool
    for trace_id, (agent, calls, tools) in expected.items():
        answer = httpx.get(f"{server.base_url}/api/v1/traces/{trace_id}/agent-graph", timeout=30)
        assert answer.status_code == 200, answer.text
        edges = {(e["source_kind"], e["source"], e["target_kind"], e["target"]): e for e in answer.json()["edges"]}
        assert ("service", "gateway", "agent", agent) in edges, edges
        model = edges[("agent", agent, "model", MODEL)]
        assert model["calls"] == calls and 0 < model["critical_ns"] <= model["duration_ns"]
        called = {target: e["calls"] for (_, source, kind, target), e in edges.items() if kind == "tool"}
        assert called == dict(tools), trace_id
        assert all(e["duration_ns"] > 0 and e["critical_ns"] <= e["duration_ns"] for e in edges.values())
        assert {source for _, source, _, _ in edges} <= {"gateway", agent}


def test_the_windows_agent_graph_sums_every_stack_trace(
    server: RunningServer, stack_spans: ExportTraceServiceRequest
) -> None:
    """``GET /api/v1/agent-graph``: the same edges summed over the window's traces, each counting the traces it
    occurs in."""
    wait_analysed(server, stack_spans)
    expected = stack_calls(stack_spans)
    answer = httpx.get(f"{server.base_url}/api/v1/agent-graph", params={"start_ns": 0, "limit": 100}, timeout=30)
    assert answer.status_code == 200, answer.text
    graph = answer.json()
    assert graph["traces"] == len(expected)
    edges = {(e["source"], e["target_kind"], e["target"]): e for e in graph["edges"]}
    agents = {agent for agent, _, _ in expected.values()}
    assert len(agents) == 1
    (agent,) = agents
    model = edges[(agent, "model", MODEL)]
    assert model["calls"] == sum(calls for _, calls, _ in expected.values())
    assert model["traces"] == sum(calls > 0 for _, calls, _ in expected.values())
    tools: Counter[str] = sum((tools for _, _, tools in expected.values()), Counter())
    assert {target: e["calls"] for (_, kind, target), e in edges.items() if kind == "tool"} == dict(tools)
    assert edges[("gateway", "agent", agent)]["traces"] == len(expected)
