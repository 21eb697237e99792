"""The gateway service: the stack's front door.

``POST /v1/agent`` (HTTP SERVER span from the FastAPI instrumentation, the root of each user trace):
reads the tenant and sampling policy from the request headers ``x-tenant-id`` and ``x-sample-policy``,
puts them into W3C baggage as ``tenant_id`` and ``sample_policy`` (and onto its own span), and forwards
the task to the agent with an instrumented HTTP client, which injects ``traceparent`` and ``baggage``.

Errors: 422 for an invalid body; the agent's status and ``{"error": {...}}`` body when the agent fails;
502 when the agent cannot be reached.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import httpx
from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse
from opentelemetry import baggage, context, trace
from opentelemetry.sdk.trace import SpanProcessor
from pydantic import BaseModel, ConfigDict, Field

from instrumented_stack.telemetry import (
    BAGGAGE_SAMPLE_POLICY,
    BAGGAGE_TENANT_ID,
    build_tracer_provider,
    instrument_fastapi_app,
    instrument_httpx_client,
)


class GatewayConfig(BaseModel):
    """Settings of the gateway service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_url: str = Field(description="root URL of the agent service")
    service_name: str = Field(default="gateway", description="OTel service.name")
    agent_timeout_s: float = Field(default=300.0, gt=0, description="agent call timeout in seconds")


class UserRequest(BaseModel):
    """``POST /v1/agent`` body: a prompt and the answer's length in tokens."""

    prompt: str = Field(min_length=1)
    max_tokens: int = Field(ge=1, description="tokens the answer must have")


class GatewayAnswer(BaseModel):
    """``POST /v1/agent`` response."""

    trace_id: str = Field(description="W3C trace id of this request, 32 lowercase hex characters")
    answer: str
    model: str
    finish_reason: str
    input_tokens: int
    output_tokens: int


class AgentCallError(Exception):
    """The agent call failed; becomes the gateway's response with ``status`` and ``{"error": {...}}``."""

    def __init__(self, status: int, error: dict[str, object]) -> None:
        super().__init__(str(error.get("message", error)))
        self.status = status
        self.error = error


def _agent_failure(response: httpx.Response) -> AgentCallError:
    """The agent's error status and its ``error`` object (or the start of a non-JSON body)."""
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        error = {"message": response.text[:200], "type": "agent_error"}
    return AgentCallError(response.status_code, error if isinstance(error, dict) else {"message": str(error)})


def create_gateway_app(config: GatewayConfig, span_processor: SpanProcessor) -> FastAPI:
    """The gateway as a FastAPI app.

    Args:
        config: gateway settings, including the agent's URL.
        span_processor: receives the gateway's spans (``service.name`` = ``config.service_name``); shut
            down, and so flushed, when the app's lifespan ends.
    """
    provider = build_tracer_provider(config.service_name, span_processor)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            async with httpx.AsyncClient(base_url=config.agent_url, timeout=config.agent_timeout_s) as http:
                instrument_httpx_client(http, provider)
                app.state.agent_http = http
                yield
        finally:
            provider.shutdown()

    app = FastAPI(title="Hotspan instrumented stack: gateway", lifespan=lifespan)
    instrument_fastapi_app(app, provider)

    @app.exception_handler(AgentCallError)
    async def on_agent_error(_: Request, error: AgentCallError) -> JSONResponse:
        return JSONResponse(status_code=error.status, content={"error": error.error})

    @app.post(
        "/v1/agent",
        operation_id="ask_agent",
        description="Forward a user request to the agent. Headers x-tenant-id and x-sample-policy become "
        "W3C baggage tenant_id and sample_policy for every downstream service.",
        responses={502: {"description": "the agent failed or could not be reached"}},
    )
    async def ask_agent(
        body: UserRequest,
        request: Request,
        x_tenant_id: Annotated[str | None, Header()] = None,
        x_sample_policy: Annotated[str | None, Header()] = None,
    ) -> GatewayAnswer:
        span = trace.get_current_span()
        ctx = context.get_current()
        for key, value in ((BAGGAGE_TENANT_ID, x_tenant_id), (BAGGAGE_SAMPLE_POLICY, x_sample_policy)):
            if value:
                ctx = baggage.set_baggage(key, value, ctx)
                span.set_attribute(key, value)
        http: httpx.AsyncClient = request.app.state.agent_http
        token = context.attach(ctx)
        try:
            response = await http.post("/v1/invoke", json=body.model_dump())
        except httpx.HTTPError as error:
            raise AgentCallError(502, {"message": f"agent unreachable: {error!r}", "type": "agent_error"}) from error
        finally:
            context.detach(token)
        if response.is_error:
            raise _agent_failure(response)
        answer = response.json()
        return GatewayAnswer(
            trace_id=trace.format_trace_id(span.get_span_context().trace_id),
            answer=answer["answer"],
            model=answer["model"],
            finish_reason=answer["finish_reason"],
            input_tokens=answer["input_tokens"],
            output_tokens=answer["output_tokens"],
        )

    return app
