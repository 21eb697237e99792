"""The gateway service: the stack's front door, with bearer auth and SLA-aware priority admission.

``POST /v1/agent`` (HTTP SERVER span from the FastAPI instrumentation, the root of each user trace):

1. **Auth.** With ``tenants`` configured, ``Authorization: Bearer <api key>`` names the tenant and its tier;
   a missing or unknown key is a 401. Without ``tenants`` (development), ``x-tenant-id`` names the tenant and
   every request gets ``default_tier``.
2. **Admission** (``admission.AdmissionController``) inside ``admission {tier}`` (INTERNAL;
   ``gateway.priority_tier``, ``gateway.estimated_wait_s``, ``gateway.sla_s``, ``gateway.queue_wait_s``):
   when the tier's estimated queue wait exceeds its SLA the request is answered 429 with ``Retry-After`` and
   the SERVER span gets an ``admission.rejected`` event whose attributes say why (tier, estimated wait, SLA,
   queue depth); otherwise it waits for a slot, urgent tiers first (or in arrival order with
   ``admission_order="fifo"``).
3. **Forward** to the agent with an instrumented HTTP client (CLIENT span) that injects ``traceparent`` and
   ``baggage``: the tenant and sampling policy (``x-sample-policy``) travel as W3C baggage ``tenant_id`` and
   ``sample_policy`` and are set on the gateway's span.

``GET /metrics`` (Prometheus text, not traced): ``gateway_requests_total`` by ``tier``, requests authenticated.

Errors (``{"error": {...}}``): 401 bad credentials, 422 invalid body, 429 admission refused, the agent's
status when the agent fails, 502 when the agent cannot be reached.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import httpx
from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse, Response
from opentelemetry import baggage, context, trace
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import SpanKind, Tracer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from pydantic import BaseModel, ConfigDict, Field

from instrumented_stack.admission import Admission, AdmissionController, AdmissionOrder, AdmissionRejected, Tier
from instrumented_stack.semconv import (
    GATEWAY_ESTIMATED_WAIT_S,
    GATEWAY_QUEUE_DEPTH,
    GATEWAY_QUEUE_WAIT_S,
    GATEWAY_SLA_S,
    GATEWAY_TIER,
)
from instrumented_stack.telemetry import (
    BAGGAGE_SAMPLE_POLICY,
    BAGGAGE_TENANT_ID,
    build_tracer_provider,
    instrument_fastapi_app,
    instrument_httpx_client,
)

REJECTED_EVENT = "admission.rejected"


class TenantKey(BaseModel):
    """One API key: who it authenticates and that tenant's priority tier."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    api_key: str = Field(min_length=8)
    tenant_id: str = Field(min_length=1)
    tier: Tier = "P1"


class GatewayConfig(BaseModel):
    """Settings of the gateway service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_url: str = Field(description="root URL of the agent service")
    service_name: str = Field(default="gateway", description="OTel service.name")
    agent_timeout_s: float = Field(default=300.0, gt=0, description="agent call timeout in seconds")
    tenants: tuple[TenantKey, ...] = Field(default=(), description="API keys; empty: no auth (x-tenant-id trusted)")
    default_tier: Tier = Field(default="P1", description="tier of every request when auth is off")
    max_in_flight: int = Field(default=64, ge=1, description="requests forwarded to the agent at once")
    sla_s: dict[Tier, float] = Field(
        default_factory=lambda: {"P0": 60.0, "P1": 20.0, "P2": 5.0},
        description="longest queue wait per tier, seconds",
    )
    initial_service_s: float = Field(default=1.0, ge=0, description="assumed agent time before any is seen, s")
    admission_order: AdmissionOrder = Field(
        default="priority", description="priority: urgent tiers first; fifo: arrival order, tiers differ by SLA only"
    )


class UserRequest(BaseModel):
    """``POST /v1/agent`` body: a prompt, the answer's length in tokens, the conversation it continues."""

    prompt: str = Field(min_length=1)
    max_tokens: int = Field(ge=1, description="tokens the answer must have")
    conversation_id: str | None = Field(
        default=None, min_length=1, max_length=256, description="the user's session; the agent names it on its spans"
    )


class GatewayAnswer(BaseModel):
    """``POST /v1/agent`` response."""

    trace_id: str = Field(description="W3C trace id of this request, 32 lowercase hex characters")
    answer: str
    model: str
    intent: str
    finish_reason: str
    input_tokens: int
    output_tokens: int


class GatewayError(Exception):
    """Becomes the gateway's response: ``status``, ``{"error": error}`` and ``headers``."""

    def __init__(self, status: int, error: dict[str, object], headers: dict[str, str] | None = None) -> None:
        super().__init__(str(error.get("message", error)))
        self.status = status
        self.error = error
        self.headers = headers or {}


def _agent_failure(response: httpx.Response) -> GatewayError:
    """The agent's error status and its ``error`` object (or the start of a non-JSON body)."""
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        error = {"message": response.text[:200], "type": "agent_error"}
    return GatewayError(response.status_code, error if isinstance(error, dict) else {"message": str(error)})


def _authenticate(config: GatewayConfig, authorization: str | None, x_tenant_id: str | None) -> tuple[str | None, str]:
    """``(tenant id, tier)`` of the caller. Raises :class:`GatewayError` 401 for bad credentials."""
    if not config.tenants:
        return x_tenant_id, config.default_tier
    scheme, _, key = (authorization or "").partition(" ")
    match = next((t for t in config.tenants if scheme.lower() == "bearer" and t.api_key == key.strip()), None)
    if match is None:
        raise GatewayError(
            401, {"message": "missing or unknown bearer token", "type": "unauthorized"}, {"WWW-Authenticate": "Bearer"}
        )
    return match.tenant_id, match.tier


async def _admit(admission: AdmissionController, tracer: Tracer, tier: str, sla_s: float) -> Admission:
    """Admission inside ``admission {tier}``; on refusal an event on the SERVER span and a 429."""
    server_span = trace.get_current_span()
    with tracer.start_as_current_span(
        f"admission {tier}", kind=SpanKind.INTERNAL, attributes={GATEWAY_TIER: tier, GATEWAY_SLA_S: sla_s}
    ) as span:
        try:
            admitted = await admission.admit(tier)
        except AdmissionRejected as rejected:
            server_span.add_event(
                REJECTED_EVENT,
                {
                    GATEWAY_TIER: rejected.tier,
                    GATEWAY_ESTIMATED_WAIT_S: rejected.estimated_wait_s,
                    GATEWAY_SLA_S: rejected.sla_s,
                    GATEWAY_QUEUE_DEPTH: rejected.queue_depth,
                    "reason": str(rejected),
                },
            )
            span.set_attribute(GATEWAY_ESTIMATED_WAIT_S, rejected.estimated_wait_s)
            retry_after = str(max(1, math.ceil(rejected.estimated_wait_s)))
            raise GatewayError(
                429, {"message": str(rejected), "type": "admission_rejected"}, {"Retry-After": retry_after}
            ) from rejected
        span.set_attributes(
            {GATEWAY_ESTIMATED_WAIT_S: admitted.estimated_wait_s, GATEWAY_QUEUE_WAIT_S: admitted.wait_s}
        )
        return admitted


def create_gateway_app(config: GatewayConfig, span_processor: SpanProcessor) -> FastAPI:
    """The gateway as a FastAPI app.

    Args:
        config: gateway settings, including the agent's URL, API keys and admission limits.
        span_processor: receives the gateway's spans (``service.name`` = ``config.service_name``); shut
            down, and so flushed, when the app's lifespan ends.
    """
    provider = build_tracer_provider(config.service_name, span_processor)
    tracer = provider.get_tracer(__name__)
    # A registry per app: several gateways can share one process (the threaded stack, tests).
    registry = CollectorRegistry()
    requests_by_tier = Counter("gateway_requests", "Requests authenticated, by tier.", ["tier"], registry=registry)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            async with httpx.AsyncClient(base_url=config.agent_url, timeout=config.agent_timeout_s) as http:
                instrument_httpx_client(http, provider)
                app.state.agent_http = http
                app.state.admission = AdmissionController(
                    config.max_in_flight, dict(config.sla_s), config.initial_service_s, order=config.admission_order
                )
                yield
        finally:
            provider.shutdown()

    app = FastAPI(title="Hotspan instrumented stack: gateway", lifespan=lifespan)
    instrument_fastapi_app(app, provider, excluded_urls="/metrics")

    @app.exception_handler(GatewayError)
    async def on_gateway_error(_: Request, error: GatewayError) -> JSONResponse:
        return JSONResponse(status_code=error.status, content={"error": error.error}, headers=error.headers)

    @app.post(
        "/v1/agent",
        operation_id="ask_agent",
        description="Authenticate (bearer API key), admit by priority tier, forward to the agent. The tenant "
        "and x-sample-policy become W3C baggage tenant_id and sample_policy for every downstream service.",
        responses={
            401: {"description": "missing or unknown bearer token"},
            429: {"description": "the tier's queue wait would exceed its SLA; Retry-After in seconds"},
            502: {"description": "the agent failed or could not be reached"},
        },
    )
    async def ask_agent(
        body: UserRequest,
        request: Request,
        authorization: Annotated[str | None, Header()] = None,
        x_tenant_id: Annotated[str | None, Header()] = None,
        x_sample_policy: Annotated[str | None, Header()] = None,
    ) -> GatewayAnswer:
        span = trace.get_current_span()
        tenant, tier = _authenticate(config, authorization, x_tenant_id)
        requests_by_tier.labels(tier).inc()
        span.set_attribute(GATEWAY_TIER, tier)
        ctx = context.get_current()
        for key, value in ((BAGGAGE_TENANT_ID, tenant), (BAGGAGE_SAMPLE_POLICY, x_sample_policy)):
            if value:
                ctx = baggage.set_baggage(key, value, ctx)
                span.set_attribute(key, value)
        admission: AdmissionController = request.app.state.admission
        await _admit(admission, tracer, tier, config.sla_s[tier])
        http: httpx.AsyncClient = request.app.state.agent_http
        started = time.monotonic()
        token = context.attach(ctx)
        try:
            response = await http.post("/v1/invoke", json=body.model_dump())
        except httpx.HTTPError as error:
            raise GatewayError(502, {"message": f"agent unreachable: {error!r}", "type": "agent_error"}) from error
        finally:
            context.detach(token)
            admission.release(time.monotonic() - started)
        if response.is_error:
            raise _agent_failure(response)
        answer = response.json()
        return GatewayAnswer(
            trace_id=trace.format_trace_id(span.get_span_context().trace_id),
            answer=answer["answer"],
            model=answer["model"],
            intent=answer["intent"],
            finish_reason=answer["finish_reason"],
            input_tokens=answer["input_tokens"],
            output_tokens=answer["output_tokens"],
        )

    @app.get(
        "/metrics",
        operation_id="metrics",
        description="Prometheus metrics (text exposition format): gateway_requests_total by tier.",
        response_class=Response,
    )
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app
