"""The agent service: plans the request, then asks the LLM.

``POST /v1/invoke`` runs, inside the HTTP SERVER span that the FastAPI instrumentation opens:

- ``invoke_agent {agent_name}`` (INTERNAL; GenAI semconv agent span, ``gen_ai.operation.name=invoke_agent``,
  ``gen_ai.agent.name``), carrying the caller's W3C baggage ``tenant_id``/``sample_policy`` as attributes;
  - ``plan {agent_name}`` (INTERNAL): a routing step that counts prompt tokens and picks a route
    (``agent.route``: ``direct`` or ``long_context``) and the plan's steps (``agent.plan.steps``);
  - ``chat {model}`` (CLIENT): the LLM call (``llm_client``), parent of the engine's ``llm_request``.

Errors: 422 for an invalid body; 502 ``{"error": {...}}`` when the LLM call fails.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import SpanKind, Tracer
from pydantic import BaseModel, ConfigDict, Field

from instrumented_stack.llm_client import LlmClient, LlmError
from instrumented_stack.telemetry import (
    build_tracer_provider,
    copy_baggage_to_span,
    instrument_fastapi_app,
)
from instrumented_stack.tokenizer import Tokenizer, WhitespaceTokenizer

GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
AGENT_ROUTE = "agent.route"
AGENT_PLAN_STEPS = "agent.plan.steps"
AGENT_PROMPT_TOKENS = "agent.prompt_tokens"


class AgentConfig(BaseModel):
    """Settings of the agent service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    llm_base_url: str = Field(description="root URL of the OpenAI-compatible LLM server")
    model: str = Field(default="meta-llama/Llama-3.1-8B-Instruct", min_length=1, description="model to ask")
    service_name: str = Field(default="agent", description="OTel service.name")
    agent_name: str = Field(default="support-agent", min_length=1, description="gen_ai.agent.name")
    temperature: float = Field(default=0.7, ge=0)
    top_p: float = Field(default=0.95, gt=0, le=1)
    long_context_tokens: int = Field(default=4096, ge=1, description="prompts above this route to long_context")
    llm_timeout_s: float = Field(default=300.0, gt=0, description="LLM call timeout in seconds")


class AgentTask(BaseModel):
    """``POST /v1/invoke`` body."""

    prompt: str = Field(min_length=1, description="the user's prompt")
    max_tokens: int = Field(ge=1, description="tokens the answer must have")


class AgentAnswer(BaseModel):
    """``POST /v1/invoke`` response."""

    answer: str
    model: str
    route: str
    llm_response_id: str
    finish_reason: str
    input_tokens: int = Field(description="prompt tokens the LLM reported")
    output_tokens: int = Field(description="completion tokens the LLM reported")


@dataclass(frozen=True, slots=True)
class Plan:
    """The routing decision: which route and which steps (in order)."""

    route: str
    steps: tuple[str, ...]


def plan_request(prompt_tokens: int, long_context_tokens: int) -> Plan:
    """Route a prompt of ``prompt_tokens`` tokens; both routes answer with a single LLM call today."""
    route = "long_context" if prompt_tokens > long_context_tokens else "direct"
    return Plan(route=route, steps=("chat",))


class Agent:
    """The agent's work for one request; used from the app's event loop."""

    def __init__(self, config: AgentConfig, tracer: Tracer, llm: LlmClient, tokenizer: Tokenizer) -> None:
        self._config = config
        self._tracer = tracer
        self._llm = llm
        self._tokenizer = tokenizer

    async def invoke(self, task: AgentTask) -> AgentAnswer:
        """Plan, then call the LLM. Raises :class:`LlmError` when the LLM call fails."""
        name = self._config.agent_name
        with self._tracer.start_as_current_span(
            f"invoke_agent {name}",
            kind=SpanKind.INTERNAL,
            attributes={GEN_AI_OPERATION_NAME: "invoke_agent", GEN_AI_AGENT_NAME: name},
        ) as agent_span:
            copy_baggage_to_span(agent_span)
            with self._tracer.start_as_current_span(f"plan {name}", kind=SpanKind.INTERNAL) as plan_span:
                prompt_tokens = self._tokenizer.count(task.prompt)
                plan = plan_request(prompt_tokens, self._config.long_context_tokens)
                plan_span.set_attributes(
                    {
                        AGENT_PROMPT_TOKENS: prompt_tokens,
                        AGENT_ROUTE: plan.route,
                        AGENT_PLAN_STEPS: list(plan.steps),
                    }
                )
            # No system prompt: the engine must see exactly the user's prompt tokens, so a replayed
            # workload row keeps its ContextTokens.
            result = await self._llm.chat(
                [{"role": "user", "content": task.prompt}],
                max_tokens=task.max_tokens,
                temperature=self._config.temperature,
                top_p=self._config.top_p,
                ignore_eos=True,
            )
            return AgentAnswer(
                answer=result.text,
                model=result.model,
                route=plan.route,
                llm_response_id=result.response_id,
                finish_reason=result.finish_reason,
                input_tokens=result.input_tokens,
                output_tokens=result.output_tokens,
            )


def create_agent_app(
    config: AgentConfig, span_processor: SpanProcessor, *, tokenizer: Tokenizer | None = None
) -> FastAPI:
    """The agent service as a FastAPI app.

    Args:
        config: agent settings, including the LLM server's URL.
        span_processor: receives the agent's spans (``service.name`` = ``config.service_name``); shut
            down, and so flushed, when the app's lifespan ends.
        tokenizer: counts prompt tokens for routing; default :class:`WhitespaceTokenizer`.
    """
    provider = build_tracer_provider(config.service_name, span_processor)
    tracer = provider.get_tracer(__name__)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            async with httpx.AsyncClient(base_url=config.llm_base_url, timeout=config.llm_timeout_s) as http:
                llm = LlmClient(http, tracer, config.model)
                app.state.agent = Agent(config, tracer, llm, tokenizer or WhitespaceTokenizer())
                yield
        finally:
            provider.shutdown()

    app = FastAPI(title="Hotspan instrumented stack: agent", lifespan=lifespan)
    instrument_fastapi_app(app, provider)

    @app.exception_handler(LlmError)
    async def on_llm_error(_: Request, error: LlmError) -> JSONResponse:
        return JSONResponse(
            status_code=502,
            content={"error": {"message": str(error), "type": "llm_error", "upstream_status": error.status}},
        )

    @app.post(
        "/v1/invoke",
        operation_id="invoke_agent",
        description="Plan the task and answer it with one LLM call. 502 when the LLM call fails.",
        responses={502: {"description": "the LLM call failed"}},
    )
    async def invoke(task: AgentTask, request: Request) -> AgentAnswer:
        agent: Agent = request.app.state.agent
        return await agent.invoke(task)

    return app
