"""Failures along the chain: a dead LLM engine, a dead agent, an invalid request."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from fastapi import FastAPI
from opentelemetry.trace import SpanKind, StatusCode

from instrumented_stack.agent import AgentConfig, create_agent_app
from instrumented_stack.capture import InMemorySpans
from instrumented_stack.gateway import GatewayConfig, create_gateway_app
from instrumented_stack.serving import bind_loopback, socket_url

BODY = {"prompt": "earlier turns\nTell me more about that .", "max_tokens": 4}

Serve = Callable[[FastAPI], str]


def test_dead_engine_gives_502_through_agent_and_gateway(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    dead = bind_loopback()  # bound, never listening: connections are refused
    try:
        agent_url = serve(create_agent_app(AgentConfig(llm_base_url=socket_url(dead)), in_memory_spans("agent")))
        gateway_url = serve(create_gateway_app(GatewayConfig(agent_url=agent_url), in_memory_spans("gateway")))
        response = httpx.post(f"{gateway_url}/v1/agent", json=BODY, headers={"x-tenant-id": "acme"})
    finally:
        dead.close()
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["type"] == "llm_error"
    assert "LLM call failed" in error["message"]
    (chat,) = [s for s in in_memory_spans.spans("agent") if s.kind == SpanKind.CLIENT]
    assert chat.status.status_code == StatusCode.ERROR
    assert chat.attributes["error.type"] == "ConnectError"
    (connect,) = [s for s in in_memory_spans.spans("agent") if s.name == "connect"]
    assert connect.status.status_code == StatusCode.ERROR and connect.parent.span_id == chat.context.span_id
    (invoke,) = [s for s in in_memory_spans.spans("agent") if s.name.startswith("invoke_agent")]
    assert invoke.status.status_code == StatusCode.ERROR
    assert invoke.attributes["tenant_id"] == "acme"


def test_prompt_over_the_context_limit_fails_before_sending(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    dead = bind_loopback()
    try:
        config = AgentConfig(llm_base_url=socket_url(dead), max_model_len=8)
        agent_url = serve(create_agent_app(config, in_memory_spans("agent")))
        response = httpx.post(f"{agent_url}/v1/invoke", json=BODY)
    finally:
        dead.close()
    assert response.status_code == 502
    (chat,) = [s for s in in_memory_spans.spans("agent") if s.kind == SpanKind.CLIENT]
    assert chat.attributes["error.type"] == "context_length_exceeded"
    assert not [s for s in in_memory_spans.spans("agent") if s.name == "connect"]


def test_dead_agent_gives_502_from_gateway(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    dead = bind_loopback()
    try:
        gateway_url = serve(create_gateway_app(GatewayConfig(agent_url=socket_url(dead)), in_memory_spans("gateway")))
        response = httpx.post(f"{gateway_url}/v1/agent", json=BODY)
    finally:
        dead.close()
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "agent_error"


def test_invalid_user_request_is_422(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    dead = bind_loopback()
    try:
        gateway_url = serve(create_gateway_app(GatewayConfig(agent_url=socket_url(dead)), in_memory_spans("gateway")))
        response = httpx.post(f"{gateway_url}/v1/agent", json={"prompt": "", "max_tokens": 0})
    finally:
        dead.close()
    assert response.status_code == 422
