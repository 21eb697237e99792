"""The agent (orchestrator) service: route the intent, run a planning loop of tools and retrieval, answer.

``POST /v1/invoke`` runs, inside the HTTP SERVER span that the FastAPI instrumentation opens:

- ``invoke_agent {agent_name}`` (INTERNAL; GenAI semconv agent span: ``gen_ai.operation.name=invoke_agent``,
  ``gen_ai.agent.name``, ``gen_ai.conversation.id`` when the body names the user's session, ``agent.intent``,
  ``agent.plan.steps``, ``agent.plan.max_steps``), carrying the caller's W3C baggage ``tenant_id``/``sample_policy``
  as attributes;
  - ``plan {agent_name}`` (INTERNAL): intent routing (``planning.route``);
  - per step of the loop (``planning.next_action``, at most ``max_steps``):
    - retrieve: the retriever call (HTTP CLIENT span, then the retriever's spans);
    - tool: ``execute_tool {tool}`` (INTERNAL; ``gen_ai.operation.name=execute_tool``, ``gen_ai.tool.name``,
      ``gen_ai.tool.type``, ``gen_ai.tool.call.id``) holding ``validate_tool_args`` (``tool_selection``)
      and the tool service call (HTTP CLIENT span, then the tool service's spans);
    - answer: ``chat {model}`` (``llm_client``), parent of the engine's ``llm_request``.

The answer prompt is the user's prompt, then the retrieved documents (at most ``max_context_docs``) and the
tool results, so a ``chat`` request's prompt is exactly the user's prompt and keeps a replayed workload
row's token count.

Behaviour knobs that the fault switches turn (``faults.py``): ``retrieval_top_k``, ``tool_validation``,
``tool_calls`` (``blocking`` calls the tool service with a synchronous client from the async handler,
stalling the event loop), ``llm_calls_per_answer`` (the same prompt sent again), ``output_tokens_factor``,
and the LLM client's ``llm_connection``/``tokenizer_max_requests``.

Errors: 422 for an invalid body; 502 ``{"error": {...}}`` when the LLM call fails or a dependency cannot be
reached.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from pydantic import BaseModel, ConfigDict, Field

from instrumented_stack.llm_client import ChatResult, ConnectionMode, LlmClient, LlmClientConfig, LlmError
from instrumented_stack.planning import Action, PlanState, last_line, next_action, route
from instrumented_stack.semconv import (
    AGENT_INTENT,
    AGENT_MAX_STEPS,
    AGENT_PLAN_STEPS,
    ERROR_TYPE,
    GEN_AI_AGENT_NAME,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_OPERATION_NAME,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
)
from instrumented_stack.telemetry import (
    build_tracer_provider,
    instrument_fastapi_app,
    instrument_httpx_client,
)
from instrumented_stack.tokenizer import tokenizer_file
from instrumented_stack.tool_selection import ToolSelector, ValidationMode
from instrumented_stack.tools import tool_definitions

UNSET_URL = "http://127.0.0.1:0"
"""Placeholder URL of a dependency that the stack fills in once ports are bound."""


class AgentConfig(BaseModel):
    """Settings of the agent service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    llm_base_url: str = Field(description="root URL of the OpenAI-compatible LLM server (http or https)")
    retriever_url: str = Field(default=UNSET_URL, description="root URL of the retriever service")
    tools_url: str = Field(default=UNSET_URL, description="root URL of the tool service")
    model: str = Field(default="meta-llama/Llama-3.1-8B-Instruct", min_length=1, description="model to ask")
    service_name: str = Field(default="agent", description="OTel service.name")
    agent_name: str = Field(default="support-agent", min_length=1, description="gen_ai.agent.name")
    temperature: float = Field(default=0.7, ge=0)
    top_p: float = Field(default=0.95, gt=0, le=1)
    max_steps: int = Field(default=4, ge=1, description="planning loop limit; the last step always answers")
    retrieval_top_k: int = Field(default=4, ge=1, description="documents asked from the retriever")
    max_context_docs: int = Field(default=4, ge=0, description="retrieved documents put into the prompt")
    output_tokens_factor: float = Field(default=1.0, gt=0, description="LLM max_tokens = ceil(asked * factor)")
    llm_calls_per_answer: int = Field(default=1, ge=1, description="times the same answer prompt is sent")
    tool_validation: ValidationMode = Field(default="cached", description="tool argument validation mode")
    tool_calls: Literal["async", "blocking"] = Field(default="async", description="tool service client kind")
    llm_connection: ConnectionMode = Field(default="pooled", description="LLM client connection reuse")
    llm_ca_file: Path | None = Field(default=None, description="CA bundle trusted for an https LLM server")
    tokenizer_workers: int = Field(default=4, ge=1)
    tokenizer_max_requests: int | None = Field(default=None, ge=1, description="None: workers never recycle")
    max_model_len: int = Field(default=131072, ge=2, description="prompt + max_tokens limit of the LLM")
    llm_timeout_s: float = Field(default=300.0, gt=0, description="LLM call timeout in seconds")
    service_timeout_s: float = Field(default=30.0, gt=0, description="retriever/tool call timeout in seconds")

    def llm_client_config(self) -> LlmClientConfig:
        """The LLM client's part of this configuration."""
        return LlmClientConfig(
            base_url=self.llm_base_url,
            model=self.model,
            connection=self.llm_connection,
            ca_file=self.llm_ca_file,
            timeout_s=self.llm_timeout_s,
            max_model_len=self.max_model_len,
            tokenizer_workers=self.tokenizer_workers,
            tokenizer_max_requests=self.tokenizer_max_requests,
        )


class AgentTask(BaseModel):
    """``POST /v1/invoke`` body."""

    prompt: str = Field(min_length=1, description="the conversation; its last line is the latest user turn")
    max_tokens: int = Field(ge=1, description="tokens the answer must have")
    conversation_id: str | None = Field(
        default=None, min_length=1, max_length=256, description="the user's session this request is a turn of"
    )


class AgentAnswer(BaseModel):
    """``POST /v1/invoke`` response."""

    answer: str
    model: str
    intent: str
    steps: list[str] = Field(description="actions the planning loop took, in order")
    llm_response_id: str
    finish_reason: str
    input_tokens: int = Field(description="prompt tokens the LLM reported")
    output_tokens: int = Field(description="completion tokens the LLM reported")


class DependencyError(Exception):
    """A retriever or tool service call failed at the transport level."""


class Agent:
    """The agent's work for one request; used from the app's event loop."""

    def __init__(
        self,
        config: AgentConfig,
        tracer: Tracer,
        llm: LlmClient,
        services: httpx.AsyncClient,
        blocking_tools: httpx.Client | None,
    ) -> None:
        self._config = config
        self._tracer = tracer
        self._llm = llm
        self._services = services
        self._blocking_tools = blocking_tools
        self._selector = ToolSelector(tool_definitions(), config.tool_validation, tracer)

    async def invoke(self, task: AgentTask) -> AgentAnswer:
        """Route, run the planning loop, answer. Raises :class:`LlmError` or :class:`DependencyError`."""
        config = self._config
        name = config.agent_name
        attributes: dict[str, str | int] = {
            GEN_AI_OPERATION_NAME: "invoke_agent",
            GEN_AI_AGENT_NAME: name,
            AGENT_MAX_STEPS: config.max_steps,
        }
        if task.conversation_id is not None:
            attributes[GEN_AI_CONVERSATION_ID] = task.conversation_id
        with self._tracer.start_as_current_span(
            f"invoke_agent {name}", kind=SpanKind.INTERNAL, attributes=attributes
        ) as agent_span:
            with self._tracer.start_as_current_span(f"plan {name}", kind=SpanKind.INTERNAL) as plan_span:
                state = PlanState(intent=route(task.prompt), question=last_line(task.prompt))
                plan_span.set_attribute(AGENT_INTENT, state.intent)
            steps: list[str] = []
            result: ChatResult | None = None
            for step in range(config.max_steps):
                action = next_action(state, config.max_steps - step)
                steps.append(action.tool or action.kind)
                if action.kind == "retrieve":
                    state.documents = await self._retrieve(action.query)
                elif action.kind == "tool":
                    state.tool_results[action.tool] = await self._execute_tool(action)
                else:
                    result = await self._answer(task, state)
                    break
            agent_span.set_attributes({AGENT_INTENT: state.intent, AGENT_PLAN_STEPS: steps})
            if result is None:
                raise RuntimeError("the planning loop ended without an answer")
            return AgentAnswer(
                answer=result.text,
                model=result.model,
                intent=state.intent,
                steps=steps,
                llm_response_id=result.response_id,
                finish_reason=result.finish_reason,
                input_tokens=result.input_tokens,
                output_tokens=result.output_tokens,
            )

    async def _retrieve(self, query: str) -> list[dict[str, Any]]:
        url = f"{self._config.retriever_url}/v1/retrieve"
        try:
            response = await self._services.post(url, json={"query": query, "top_k": self._config.retrieval_top_k})
        except httpx.HTTPError as error:
            raise DependencyError(f"retriever unreachable: {error!r}") from error
        if response.is_error:
            return []
        return list(response.json()["documents"])

    async def _execute_tool(self, action: Action) -> Any:
        """The tool's result, or ``None`` when its arguments are invalid or the tool refused them."""
        with self._tracer.start_as_current_span(
            f"execute_tool {action.tool}",
            kind=SpanKind.INTERNAL,
            attributes={
                GEN_AI_OPERATION_NAME: "execute_tool",
                GEN_AI_TOOL_NAME: action.tool,
                GEN_AI_TOOL_TYPE: "function",
                GEN_AI_TOOL_CALL_ID: uuid.uuid4().hex[:16],
            },
        ) as span:
            problems = self._selector.validate(action.tool, action.arguments)
            if problems:
                span.set_attribute(ERROR_TYPE, "invalid_arguments")
                span.set_status(Status(StatusCode.ERROR, "; ".join(problems)))
                return None
            url = f"{self._config.tools_url}/v1/tools/{action.tool}"
            try:
                if self._blocking_tools is not None:
                    # Deliberately synchronous (the event_loop_blocking fault): the loop stalls for the call.
                    response = self._blocking_tools.post(url, json=action.arguments)
                else:
                    response = await self._services.post(url, json=action.arguments)
            except httpx.HTTPError as error:
                raise DependencyError(f"tool service unreachable: {error!r}") from error
            if response.is_error:
                span.set_attribute(ERROR_TYPE, str(response.status_code))
                span.set_status(Status(StatusCode.ERROR, response.text[:200]))
                return None
            return response.json()["result"]

    async def _answer(self, task: AgentTask, state: PlanState) -> ChatResult:
        config = self._config
        parts = [task.prompt]
        for document in (state.documents or [])[: config.max_context_docs]:
            parts.append(f"Context {document['title']}: {document['text']}")
        for tool, outcome in state.tool_results.items():
            if outcome is not None:
                parts.append(f"Tool {tool} result: {json.dumps(outcome)}")
        messages = [{"role": "user", "content": "\n".join(parts)}]
        max_tokens = math.ceil(task.max_tokens * config.output_tokens_factor)
        result: ChatResult | None = None
        for _ in range(config.llm_calls_per_answer):
            result = await self._llm.chat(
                messages, max_tokens=max_tokens, temperature=config.temperature, top_p=config.top_p, ignore_eos=True
            )
        if result is None:
            raise RuntimeError("llm_calls_per_answer must be >= 1")
        return result


def create_agent_app(
    config: AgentConfig, span_processor: SpanProcessor, *, tokenizer_path: Path | None = None
) -> FastAPI:
    """The agent service as a FastAPI app.

    Args:
        config: agent settings, including the LLM server's, retriever's and tool service's URLs.
        span_processor: receives the agent's spans (``service.name`` = ``config.service_name``); shut
            down, and so flushed, when the app's lifespan ends.
        tokenizer_path: the LLM client's ``tokenizer.json``; default :func:`tokenizer_file`.
    """
    provider = build_tracer_provider(config.service_name, span_processor)
    tracer = provider.get_tracer(__name__)
    path = tokenizer_path or tokenizer_file()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        blocking: httpx.Client | None = None
        try:
            async with (
                httpx.AsyncClient(timeout=config.service_timeout_s) as services,
                LlmClient(config.llm_client_config(), tracer, path) as llm,
            ):
                instrument_httpx_client(services, provider)
                if config.tool_calls == "blocking":
                    blocking = httpx.Client(timeout=config.service_timeout_s)
                    instrument_httpx_client(blocking, provider)
                app.state.agent = Agent(config, tracer, llm, services, blocking)
                yield
        finally:
            if blocking is not None:
                blocking.close()
            provider.shutdown()

    app = FastAPI(title="Hotspan instrumented stack: agent", lifespan=lifespan)
    instrument_fastapi_app(app, provider)

    @app.exception_handler(LlmError)
    async def on_llm_error(_: Request, error: LlmError) -> JSONResponse:
        return JSONResponse(
            status_code=502,
            content={"error": {"message": str(error), "type": "llm_error", "upstream_status": error.status}},
        )

    @app.exception_handler(DependencyError)
    async def on_dependency_error(_: Request, error: DependencyError) -> JSONResponse:
        return JSONResponse(status_code=502, content={"error": {"message": str(error), "type": "dependency_error"}})

    @app.post(
        "/v1/invoke",
        operation_id="invoke_agent",
        description="Route the task, run the planning loop (retrieval, tools) and answer with the LLM. "
        "502 when the LLM or a dependency fails.",
        responses={502: {"description": "the LLM call or a dependency failed"}},
    )
    async def invoke(task: AgentTask, request: Request) -> AgentAnswer:
        agent: Agent = request.app.state.agent
        return await agent.invoke(task)

    return app
