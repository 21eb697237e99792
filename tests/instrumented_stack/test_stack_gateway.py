"""The gateway's bearer auth and SLA-aware priority admission, against a stub agent."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import httpx
import pytest
from fastapi import FastAPI
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from instrumented_stack.admission import AdmissionController, AdmissionOrder, AdmissionRejected
from instrumented_stack.capture import InMemorySpans
from instrumented_stack.gateway import REJECTED_EVENT, GatewayConfig, TenantKey, create_gateway_app

Serve = Callable[[FastAPI], str]
KEYS = (
    TenantKey(api_key="key-for-urgent-tenant", tenant_id="urgent", tier="P0"),
    TenantKey(api_key="key-for-batch-tenant", tenant_id="batch", tier="P2"),
)
BODY = {"prompt": "hello", "max_tokens": 1}


Gate = tuple[threading.Event, threading.Event]
URGENT = {"authorization": "Bearer key-for-urgent-tenant"}
BATCH = {"authorization": "Bearer key-for-batch-tenant"}


def _stub_agent(gate: Gate | None) -> FastAPI:
    """An agent that answers at once, or, with ``gate = (received, release)``, signals ``received`` and
    holds its first request until ``release`` is set."""
    app = FastAPI(title="stub-agent")

    @app.post("/v1/invoke")
    async def invoke() -> dict[str, object]:
        if gate is not None and not gate[0].is_set():
            gate[0].set()
            await asyncio.to_thread(gate[1].wait, 5.0)
        answer = {"answer": "ok", "model": "m", "intent": "chat", "finish_reason": "length"}
        return {**answer, "steps": ["answer"], "llm_response_id": "x", "input_tokens": 1, "output_tokens": 1}

    return app


def _wait_for_spans(spans: InMemorySpans, servers: int, timeout_s: float = 5.0) -> list[ReadableSpan]:
    """The gateway's spans once ``servers`` SERVER spans ended (a server span ends after its response)."""
    deadline = time.monotonic() + timeout_s
    while sum(s.kind == SpanKind.SERVER for s in spans.spans()) < servers and time.monotonic() < deadline:
        time.sleep(0.01)
    return spans.spans()


def _gateway(serve: Serve, spans: InMemorySpans, gate: Gate | None = None, **config: object) -> str:
    agent_url = serve(_stub_agent(gate))
    return serve(create_gateway_app(GatewayConfig(agent_url=agent_url, tenants=KEYS, **config), spans("gateway")))


def test_bearer_token_names_the_tenant_and_bad_tokens_are_401(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    url = _gateway(serve, in_memory_spans)
    # Scraped before any request (its span, were it traced, would end before the requests' spans).
    assert "gateway_requests_total{" not in httpx.get(f"{url}/metrics").text
    assert httpx.post(f"{url}/v1/agent", json=BODY).status_code == 401
    wrong = httpx.post(f"{url}/v1/agent", json=BODY, headers={"authorization": "Bearer nope-nope-nope"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert wrong.json()["error"]["type"] == "unauthorized"
    ok = httpx.post(f"{url}/v1/agent", json=BODY, headers={"authorization": "Bearer key-for-urgent-tenant"})
    assert ok.status_code == 200, ok.text
    server = [
        s for s in _wait_for_spans(in_memory_spans, 3) if s.kind == SpanKind.SERVER and s.attributes.get("tenant_id")
    ]
    assert [(s.attributes["tenant_id"], s.attributes["gateway.priority_tier"]) for s in server] == [("urgent", "P0")]
    # Authenticated requests are counted by tier on /metrics, which is scraped, not traced.
    assert not any(s.attributes.get("http.route") == "/metrics" for s in in_memory_spans.spans())
    assert 'gateway_requests_total{tier="P0"} 1.0' in httpx.get(f"{url}/metrics").text


def test_a_tier_whose_wait_would_break_its_sla_gets_429_and_an_event(
    in_memory_spans: InMemorySpans, serve: Serve
) -> None:
    # One slot, an assumed 0.3 s per request; P2 may wait 0.1 s, P0 10 s. The agent holds the first
    # request until the test lets it go, so the slot is taken while the others arrive.
    received, release = threading.Event(), threading.Event()
    url = _gateway(
        serve,
        in_memory_spans,
        gate=(received, release),
        max_in_flight=1,
        sla_s={"P0": 10.0, "P1": 5.0, "P2": 0.1},
        initial_service_s=0.3,
    )

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url) as http:
            first = asyncio.create_task(http.post("/v1/agent", json=BODY, headers=URGENT))
            assert await asyncio.to_thread(received.wait, 5.0)
            batch = await http.post("/v1/agent", json=BODY, headers=BATCH)
            urgent = asyncio.create_task(http.post("/v1/agent", json=BODY, headers=URGENT))
            # The slot stays held a second: on a loaded host the second P0 reached the gateway up to 0.14 s late
            # and waited 0.06 s of a 0.2 s hold (CI of b7b7f3e); it must still wait at least 0.15 s.
            await asyncio.sleep(1.0)
            release.set()
            return [await first, batch, await urgent]

    first, batch, urgent = asyncio.run(burst())
    finished = _wait_for_spans(in_memory_spans, 3)
    assert first.status_code == urgent.status_code == 200
    assert batch.status_code == 429 and int(batch.headers["retry-after"]) >= 1
    assert batch.json()["error"]["type"] == "admission_rejected"
    rejected = [s for s in finished if any(e.name == REJECTED_EVENT for e in s.events)]
    (span,) = rejected
    (event,) = span.events
    assert event.attributes["gateway.priority_tier"] == "P2"
    assert event.attributes["gateway.estimated_wait_s"] > event.attributes["gateway.sla_s"] == 0.1
    admitted = [s for s in finished if s.name == "admission P0"]
    assert max(s.attributes["gateway.queue_wait_s"] for s in admitted) >= 0.15, "the second P0 waited for the slot"


@pytest.mark.parametrize(
    ("queueing", "served"), [("priority", ["P0", "P1", "P2"]), ("fifo", ["P2", "P1", "P0"])], ids=["priority", "fifo"]
)
def test_urgent_tiers_are_served_first_unless_fifo(queueing: AdmissionOrder, served: list[str]) -> None:
    async def scenario() -> list[str]:
        controller = AdmissionController(1, {"P0": 60, "P1": 60, "P2": 60}, order=queueing)
        order: list[str] = []
        await controller.admit("P1")

        async def request(tier: str) -> None:
            await controller.admit(tier)
            order.append(tier)
            controller.release(0.01)

        waiting = [asyncio.create_task(request(tier)) for tier in ("P2", "P1", "P0")]
        await asyncio.sleep(0.01)
        controller.release(0.01)
        await asyncio.gather(*waiting)
        return order

    assert asyncio.run(scenario()) == served


def test_rejection_explains_itself() -> None:
    async def scenario() -> AdmissionRejected:
        controller = AdmissionController(1, {"P0": 60, "P1": 60, "P2": 0.5}, initial_service_s=2.0)
        await controller.admit("P0")
        with pytest.raises(AdmissionRejected) as caught:
            await controller.admit("P2")
        return caught.value

    rejected = asyncio.run(scenario())
    assert rejected.estimated_wait_s == pytest.approx(2.0)
    assert "exceeds its SLA" in str(rejected)
