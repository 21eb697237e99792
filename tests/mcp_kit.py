"""A real MCP client for the tests of Hotspan's MCP server (``api/mcp_server.py``): the official SDK's Streamable HTTP
client and ``ClientSession``, talking to a served Hotspan on loopback, one session per call; and the traces those
tests ask about.

The traces: the instrumented stack with its ``queue_saturation`` fault (vLLM's ``max_num_seqs`` 1): 24 Azure
conversation rows replayed closed-loop by four users through the five services in this process (engine speed 20).
Requests wait in the engine's scheduler queue, so diagnosis names ``queue_saturation`` and the waiting shows as the
``llm.queue`` stage."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Tool
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from hotspan.server import RunningServer
from instrumented_stack.capture import InMemorySpans
from instrumented_stack.faults import apply_faults
from instrumented_stack.loadgen import UserSettings, replay_closed_loop
from instrumented_stack.prompts import PromptBuilder
from instrumented_stack.runner import with_speed
from instrumented_stack.stack import Stack, StackConfig
from instrumented_stack.tokenizer import default_tokenizer
from instrumented_stack.workload import load_workload

T = TypeVar("T")
TIMEOUT_S = 120.0
"""Longest a tool call may take (a window's diagnosis on a loaded host)."""
ROWS = 24
USERS = 4
FAULT = "queue_saturation"


def in_session(base_url: str, use: Callable[[ClientSession], Awaitable[T]], token: str | None = None) -> T:
    """``use(session)`` on an initialized session with the server at ``base_url``'s ``/mcp``, sending ``token`` as a
    bearer token when given."""

    async def run() -> T:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_S) as http,
            streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write, *_),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await use(session)

    return asyncio.run(run())


def call_tool(base_url: str, name: str, arguments: dict[str, Any], token: str | None = None) -> CallToolResult:
    """The result of one call of tool ``name``."""
    return in_session(base_url, lambda session: session.call_tool(name, arguments), token)


def list_tools(base_url: str, token: str | None = None) -> list[Tool]:
    """The server's tools."""

    async def tools(session: ClientSession) -> list[Tool]:
        return (await session.list_tools()).tools

    return in_session(base_url, tools, token)


def text(result: CallToolResult) -> str:
    """The text of a result's content blocks, joined."""
    return "\n".join(block.text for block in result.content if block.type == "text")


def fault_spans() -> ExportTraceServiceRequest:
    """One stack run with :data:`FAULT` on (:data:`ROWS` rows, :data:`USERS` users), as an OTLP export request."""
    config = with_speed(apply_faults(StackConfig(), [FAULT]), 20.0)
    builder = PromptBuilder(default_tokenizer(), 7, {"catalogue": 2.0, "calculate": 1.0, "policy": 1.0})
    prompts = [builder.build(row) for row in load_workload("azure-conv", limit=ROWS)]
    spans = InMemorySpans()
    with Stack(config, spans) as stack:
        settings = UserSettings(tenants=config.credentials())
        outcomes = asyncio.run(replay_closed_loop(stack.gateway_url, prompts, settings, users=USERS))
    assert all(outcome.ok for outcome in outcomes), [o.error for o in outcomes if not o.ok]
    return encode_spans(spans.spans())


def stages_ns(server: RunningServer, trace_id: str) -> dict[str, int]:
    """The trace's stages (stage -> ns) as the REST API gives them."""
    answer = httpx.get(f"{server.base_url}/api/v1/traces/{trace_id}/stages", timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()["stages_ns"]
