"""The vLLM emulator's HTTP front end: OpenAI-compatible routes over an :class:`EngineCore`.

Routes (as ``vllm serve`` exposes them): ``POST /v1/completions``, ``POST /v1/chat/completions``,
``POST /v1/responses`` (``responses_protocol``), Anthropic's ``POST /v1/messages`` and
``POST /v1/messages/count_tokens`` (``anthropic_protocol``), ``GET /health``,
``GET /metrics`` (vLLM's Prometheus metrics, ``engine.metrics``). Each served request
records one ``llm_request`` span (see ``vllm_span``) and nothing else: like vLLM, the engine adds no HTTP
server span, and it reads only ``traceparent``/``tracestate``. ``EngineConfig.trace_requests=False`` records
none, as vLLM started without ``--otlp-traces-endpoint``.

What real OpenAI clients need: ``stream: true`` (``streaming``: chunks paced by the engine's steps),
tool calls when a chat offers ``tools`` (``tool_calls``: which tool, minimal valid arguments),
``usage.prompt_tokens_details.cached_tokens`` from the prefix cache, answers that end (``answer_tokens``:
the emulated EOS, ``finish_reason`` ``stop``), and provider throttling (``throttle``: a seeded share of
requests answered 429 or 503 with ``Retry-After``).

Prompts are tokenized with the stack's BPE tokenizer (``tokenizer``); their token ids go to the core, whose
prefix cache hashes them in KV blocks.

Errors use vLLM's body ``{"error": {"message", "type", "param", "code"}}``: 400 for an invalid request
(bad fields, empty prompt, ``n > 1``, prompt + max_tokens over ``max_model_len``), 404 for an unknown model
name, 429/503 for a throttled request.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Self

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import Tracer
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ConfigDict, Field, model_validator

from instrumented_stack.engine.anthropic_protocol import (
    STOP_REASONS,
    ContentBlock,
    MessageResponse,
    MessagesRequest,
    MessagesUsage,
    TokenCount,
    messages_usage,
)
from instrumented_stack.engine.anthropic_streaming import message_events
from instrumented_stack.engine.batching_core import BatchingEngineCore
from instrumented_stack.engine.config_resource import engine_config_attributes
from instrumented_stack.engine.core import EngineCore, EngineRequest, EngineResult, TokenListener
from instrumented_stack.engine.metrics import EngineMetrics
from instrumented_stack.engine.openai_protocol import (
    COMPLETIONS_DEFAULT_MAX_TOKENS,
    AssistantMessage,
    ChatChoice,
    ChatCompletionRequest,
    ChatCompletionResponse,
    CompletionChoice,
    CompletionRequest,
    CompletionResponse,
    ErrorInfo,
    ErrorResponse,
    FunctionCall,
    PromptTokensDetails,
    SamplingFields,
    ToolCall,
    UsageInfo,
)
from instrumented_stack.engine.responses_protocol import (
    ResponsesRequest,
    function_call_name,
    response_object,
    responses_usage,
)
from instrumented_stack.engine.responses_streaming import response_events
from instrumented_stack.engine.scheduler import SchedulerConfig
from instrumented_stack.engine.streaming import EVENT_STREAM, StreamHead, TokenStream, chat_events, completion_events
from instrumented_stack.engine.throttle import Throttle, ThrottleConfig
from instrumented_stack.engine.time_model import StepTimeModel
from instrumented_stack.engine.tool_calls import PlannedToolCall, plan_tool_call
from instrumented_stack.engine.vllm_span import VLLM_TRACER_NAME, record_llm_request_span
from instrumented_stack.telemetry import build_tracer_provider
from instrumented_stack.tokenizer import BpeTokenizer, Tokenizer, tokenizer_file

_ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    400: {"model": ErrorResponse, "description": "invalid request"},
    404: {"model": ErrorResponse, "description": "unknown model"},
    429: {"model": ErrorResponse, "description": "throttled (rate limit); Retry-After and retry-after-ms set"},
    503: {"model": ErrorResponse, "description": "throttled (overloaded); Retry-After and retry-after-ms set"},
}
_THROTTLE_ERRORS = {429: ("RateLimitError", "Rate limit reached"), 503: ("ServiceUnavailableError", "Overloaded")}


class EngineConfig(BaseModel):
    """Settings of one emulated vLLM server."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    service_name: str = Field(default="vllm", description="OTel service.name of the engine")
    served_model_name: str = Field(default="meta-llama/Llama-3.1-8B-Instruct", min_length=1)
    max_model_len: int = Field(default=131072, ge=2, description="prompt + output token limit")
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    time_model: StepTimeModel = Field(default_factory=StepTimeModel)
    engine_index: int = Field(default=0, ge=0, description="the engine label of the metrics")
    answer_tokens: int | None = Field(
        default=None,
        ge=1,
        description="the emulated model ends a text answer (EOS, finish_reason stop) after this many tokens "
        "unless max_tokens is lower; None: never, every answer runs to max_tokens (finish_reason length)",
    )
    trace_requests: bool = Field(
        default=True, description="record vLLM's llm_request span (vLLM's --otlp-traces-endpoint set)"
    )
    throttle: ThrottleConfig = Field(default_factory=ThrottleConfig, description="requests refused 429/503")

    @model_validator(mode="after")
    def _longest_request_fits_the_kv_cache(self) -> Self:
        capacity = self.scheduler.kv_capacity_tokens
        if capacity < self.max_model_len:
            raise ValueError(f"KV capacity ({capacity} tokens) is below max_model_len ({self.max_model_len})")
        return self

    @model_validator(mode="after")
    def _longest_prompt_fits_a_step_without_chunking(self) -> Self:
        # vLLM refuses the same configuration: without chunks, the longest prompt must fit one step.
        budget = self.scheduler.max_num_batched_tokens
        if not self.scheduler.enable_chunked_prefill and budget < self.max_model_len:
            raise ValueError(
                f"without chunked prefill, max_num_batched_tokens ({budget}) must be at least max_model_len "
                f"({self.max_model_len})"
            )
        return self


class EngineError(Exception):
    """A request the engine refuses; becomes an :class:`ErrorResponse` with HTTP ``status``."""

    def __init__(
        self,
        status: int,
        error_type: str,
        message: str,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.body = ErrorResponse(error=ErrorInfo(message=message, type=error_type, param=param, code=status))
        self.headers = headers or {}


def _error_response(error: EngineError) -> JSONResponse:
    return JSONResponse(status_code=error.body.error.code, content=error.body.model_dump(), headers=error.headers)


class EmulatedServer:
    """Validates requests, runs them on the core, records their spans. One per app, one event loop."""

    def __init__(self, config: EngineConfig, core: EngineCore, tokenizer: Tokenizer, tracer: Tracer) -> None:
        self._config = config
        self._core = core
        self._tokenizer = tokenizer
        self._tracer = tracer
        self._throttle = Throttle(config.throttle)

    def check_request(self, body: SamplingFields | MessagesRequest | ResponsesRequest) -> None:
        """Refuse what the emulator cannot serve, or a throttled request. Raises :class:`EngineError`
        (404, 400, or the throttle's 429/503 with ``Retry-After``)."""
        if body.model != self._config.served_model_name:
            raise EngineError(404, "NotFoundError", f"The model `{body.model}` does not exist.", "model")
        if self._throttle.refuse():
            status = self._throttle.config.status
            error_type, message = _THROTTLE_ERRORS[status]
            raise EngineError(status, error_type, message, headers=self._throttle.headers())
        if body.n != 1:
            raise EngineError(400, "BadRequestError", "the emulator serves n=1 only", "n")

    async def tokenize(self, prompt: str | list[int]) -> list[int]:
        """Prompt token ids. Raises :class:`EngineError` (400) for an empty prompt.

        Text is encoded on a worker thread: vLLM's engine core is a process of its own, so tokenizing a long
        prompt in the API server never delays its steps; encoded on this event loop, a 100k-token prompt
        (about 0.4 s) would hold every queued request back and show as scheduler queue time.
        """
        token_ids = (
            list(prompt) if isinstance(prompt, list) else await asyncio.to_thread(self._tokenizer.encode, prompt)
        )
        if not token_ids:
            raise EngineError(400, "BadRequestError", "The prompt cannot be empty", "prompt")
        return token_ids

    def engine_request(
        self,
        body: SamplingFields | MessagesRequest | ResponsesRequest,
        request_id: str,
        token_ids: list[int],
        max_tokens: int,
        eos_after: int | None = None,
    ) -> EngineRequest:
        """The core's request, with vLLM's defaults (temperature 1.0, top_p 1.0); the emulated EOS after
        ``eos_after`` tokens (default: ``answer_tokens``).

        Raises:
            EngineError: 400 when prompt plus output exceed ``max_model_len``.
        """
        limit = self._config.max_model_len
        prompt_tokens = len(token_ids)
        if prompt_tokens + max_tokens > limit:
            raise EngineError(
                400,
                "BadRequestError",
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
                "completion).",
                "max_tokens",
            )
        return EngineRequest(
            request_id=request_id,
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
            eos_after=eos_after or self._config.answer_tokens,
            prompt_token_ids=tuple(token_ids),
            temperature=1.0 if body.temperature is None else body.temperature,
            top_p=1.0 if body.top_p is None else body.top_p,
            n=body.n,
        )

    async def run(
        self, request: Request, engine_request: EngineRequest, on_token: TokenListener | None = None
    ) -> EngineResult:
        """Serve ``engine_request``; record its ``llm_request`` span (parent from ``request``'s headers) when
        the engine traces requests. ``on_token`` hears of each step that sampled a token."""
        result = await self._core.generate(engine_request, on_token)
        if self._config.trace_requests:
            record_llm_request_span(self._tracer, request.headers, engine_request, result)
        return result

    def token_stream(self, request: Request, engine_request: EngineRequest) -> TokenStream:
        """``engine_request`` run as :meth:`run` does, its tokens heard as they are sampled (streamed answers)."""
        return TokenStream(lambda listener: self.run(request, engine_request, listener))

    def output_text(self, completion_tokens: int) -> str:
        """Placeholder output of exactly ``completion_tokens`` tokens."""
        return self._tokenizer.synthesize(completion_tokens)

    def tool_call_tokens(self, call: PlannedToolCall) -> int:
        """Tokens the emulated model spends on ``call`` (its name and arguments), at least 1."""
        return max(self._tokenizer.count(f"{call.name} {call.arguments}"), 1)


def _usage(engine_request: EngineRequest, result: EngineResult) -> UsageInfo:
    return UsageInfo(
        prompt_tokens=engine_request.prompt_tokens,
        completion_tokens=result.completion_tokens,
        total_tokens=engine_request.prompt_tokens + result.completion_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=result.cached_tokens),
    )


def _include_usage(body: SamplingFields) -> bool:
    return body.stream_options is not None and body.stream_options.include_usage


def _base_request_id(request: Request) -> str:
    """``X-Request-Id`` when the caller sent one, else a random hex id (as vLLM's OpenAI server does)."""
    return request.headers.get("x-request-id") or uuid.uuid4().hex


def create_engine_app(
    config: EngineConfig,
    span_processor: SpanProcessor,
    *,
    core: EngineCore | None = None,
    tokenizer: Tokenizer | None = None,
    tokenizer_path: Path | None = None,
    metrics: EngineMetrics | None = None,
) -> FastAPI:
    """The emulator as a FastAPI app.

    Args:
        config: engine settings.
        span_processor: receives the engine's spans (``service.name`` = ``config.service_name``, and the
            configuration as ``vllm.config.*`` resource attributes, ``config_resource``); it is shut down, and
            so flushed, when the app's lifespan ends.
        core: the engine core; default :class:`BatchingEngineCore` over ``config.scheduler`` and
            ``config.time_model``, recording into ``metrics``.
        tokenizer: tokenizes text prompts and makes output text; default the stack's BPE tokenizer from
            ``tokenizer_path`` (default :func:`tokenizer_file`).
        tokenizer_path: the ``tokenizer.json`` to load when ``tokenizer`` is not given.
        metrics: where the default core records vLLM's metrics and what ``/metrics`` serves; default a
            new :class:`EngineMetrics` with its own registry.
    """
    provider = build_tracer_provider(
        config.service_name,
        span_processor,
        hotspan_sdk=False,
        resource_attributes=engine_config_attributes(config.served_model_name, config.scheduler),
    )
    engine_metrics = metrics or EngineMetrics(config.served_model_name, config.max_model_len, config.engine_index)
    engine_core = core or BatchingEngineCore(config.scheduler, config.time_model, engine_metrics)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await engine_core.aclose()
            provider.shutdown()

    app = FastAPI(title="vLLM emulator", lifespan=lifespan)
    server = EmulatedServer(
        config,
        engine_core,
        tokenizer or BpeTokenizer.from_file(tokenizer_path or tokenizer_file()),
        provider.get_tracer(VLLM_TRACER_NAME),
    )

    @app.exception_handler(EngineError)
    async def on_engine_error(_: Request, error: EngineError) -> JSONResponse:
        return _error_response(error)

    @app.exception_handler(RequestValidationError)
    async def on_invalid_request(_: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0] if error.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or None
        message = f"{where}: {first.get('msg', 'invalid request')}" if where else "invalid request body"
        return _error_response(EngineError(400, "BadRequestError", message, where))

    @app.get("/health", operation_id="health", description="200 with an empty body while the engine serves.")
    async def health() -> None:
        return None

    @app.get(
        "/metrics",
        operation_id="metrics",
        description="vLLM's Prometheus metrics (text exposition format), labels model_name and engine.",
        response_class=Response,
    )
    async def prometheus_metrics() -> Response:
        return Response(engine_metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.post(
        "/v1/completions",
        operation_id="create_completion",
        description="Complete one prompt (text or token ids). Runs to max_tokens (default 16), or to the "
        "emulated EOS (answer_tokens); latency follows the engine core's time model. stream=true answers with "
        "server-sent text_completion chunks, one per engine step.",
        responses=_ERROR_RESPONSES,
        response_model=CompletionResponse,
    )
    async def create_completion(body: CompletionRequest, request: Request) -> CompletionResponse | Response:
        server.check_request(body)
        token_ids = await server.tokenize(body.prompt)
        max_tokens = body.max_tokens or COMPLETIONS_DEFAULT_MAX_TOKENS
        response_id = f"cmpl-{_base_request_id(request)}"
        # vLLM suffixes the prompt's index: the engine (and the span) see "cmpl-<id>-0".
        engine_request = server.engine_request(body, f"{response_id}-0", token_ids, max_tokens)
        text = server.output_text(engine_request.output_tokens)
        if body.stream:
            head = StreamHead(response_id, "text_completion", int(time.time()), config.served_model_name)
            events = completion_events(
                head,
                server.token_stream(request, engine_request),
                text=text,
                total_tokens=engine_request.output_tokens,
                usage=lambda result: _usage(engine_request, result),
                include_usage=_include_usage(body),
            )
            return StreamingResponse(events, media_type=EVENT_STREAM)
        result = await server.run(request, engine_request)
        return CompletionResponse(
            id=response_id,
            created=int(time.time()),
            model=config.served_model_name,
            choices=[CompletionChoice(index=0, text=text, finish_reason=result.finish_reason)],
            usage=_usage(engine_request, result),
        )

    @app.post(
        "/v1/chat/completions",
        operation_id="create_chat_completion",
        description="Answer a chat. The prompt is the message contents (and tool calls) joined, no chat "
        "template tokens; runs to max_completion_tokens (default: the rest of max_model_len) or to the "
        "emulated EOS (answer_tokens). With tools, the answer is a call of each offered tool not yet called "
        "since the last user message, in order (finish_reason tool_calls), then text (engine.tool_calls). "
        "stream=true answers with server-sent chat.completion.chunk events, one per engine step.",
        responses=_ERROR_RESPONSES,
        response_model=ChatCompletionResponse,
    )
    async def create_chat_completion(
        body: ChatCompletionRequest, request: Request
    ) -> ChatCompletionResponse | Response:
        server.check_request(body)
        token_ids = await server.tokenize(" ".join(message.text() for message in body.messages))
        requested = body.max_completion_tokens or body.max_tokens
        max_tokens = requested or max(config.max_model_len - len(token_ids), 1)
        response_id = f"chatcmpl-{_base_request_id(request)}"
        planned = plan_tool_call(
            [message.model_dump() for message in body.messages],
            [tool.model_dump() for tool in body.tools or ()],
            body.tool_choice,
        )
        tool_call = None
        eos_after = None
        if planned is not None:
            tool_call = ToolCall(
                id=f"chatcmpl-tool-{uuid.uuid4().hex}",
                function=FunctionCall(name=planned.name, arguments=planned.arguments),
            )
            eos_after = server.tool_call_tokens(planned)
        engine_request = server.engine_request(body, response_id, token_ids, max_tokens, eos_after)
        content = None if tool_call else server.output_text(engine_request.output_tokens)
        if body.stream:
            head = StreamHead(response_id, "chat.completion.chunk", int(time.time()), config.served_model_name)
            events = chat_events(
                head,
                server.token_stream(request, engine_request),
                content=content,
                tool_call=tool_call,
                total_tokens=engine_request.output_tokens,
                usage=lambda result: _usage(engine_request, result),
                include_usage=_include_usage(body),
            )
            return StreamingResponse(events, media_type=EVENT_STREAM)
        result = await server.run(request, engine_request)
        return ChatCompletionResponse(
            id=response_id,
            created=int(time.time()),
            model=config.served_model_name,
            choices=[
                ChatChoice(
                    index=0,
                    message=AssistantMessage(content=content, tool_calls=[tool_call] if tool_call else []),
                    finish_reason="tool_calls" if tool_call else result.finish_reason,
                )
            ],
            usage=_usage(engine_request, result),
        )

    @app.post(
        "/v1/responses",
        operation_id="create_response",
        description="Answer in OpenAI's Responses API shape (responses_protocol): the prompt is the instructions, "
        "tool schemas and item texts joined; runs to max_output_tokens (default: the rest of max_model_len) or to "
        "the emulated EOS. With function tools, one function_call item per answer by the same rule as chat "
        "completions, then a message. stream=true answers with the Responses API's named events.",
        responses=_ERROR_RESPONSES,
    )
    async def create_response(body: ResponsesRequest, request: Request) -> Response:
        server.check_request(body)
        token_ids = await server.tokenize(body.prompt_text())
        max_tokens = body.max_output_tokens or max(config.max_model_len - len(token_ids), 1)
        request_id = _base_request_id(request)
        planned = plan_tool_call(body.chat_messages(), body.chat_tools(), body.chat_tool_choice())
        eos_after = server.tool_call_tokens(planned) if planned else None
        engine_request = server.engine_request(body, f"resp_{request_id}", token_ids, max_tokens, eos_after)
        item: dict[str, object]
        if planned:
            item = {"type": "function_call", "id": f"fc_{request_id}", "call_id": f"call_{uuid.uuid4().hex}"}
            item |= function_call_name(planned.name) | {"arguments": planned.arguments}
        else:
            text = server.output_text(engine_request.output_tokens)
            part = {"type": "output_text", "text": text, "annotations": []}
            item = {"type": "message", "id": f"msg_{request_id}", "role": "assistant", "content": [part]}
        head = {"id": f"resp_{request_id}", "created_at": int(time.time()), "model": config.served_model_name}
        # The API echoes the request's settings on the response.
        head |= {"instructions": body.instructions, "tools": body.tools or []}
        head |= {"tool_choice": body.tool_choice or "auto"}

        def usage(result: EngineResult) -> dict[str, object]:
            return responses_usage(engine_request.prompt_tokens, result.cached_tokens, result.completion_tokens)

        if body.stream:
            events = response_events(
                head,
                server.token_stream(request, engine_request),
                item=item,
                total_tokens=engine_request.output_tokens,
                usage=usage,
            )
            return StreamingResponse(events, media_type=EVENT_STREAM)
        result = await server.run(request, engine_request)
        done = [{**item, "status": "completed"}]
        return JSONResponse(response_object(head, done, "completed", usage(result)))

    @app.post(
        "/v1/messages",
        operation_id="create_message",
        description="Answer a conversation in Anthropic's Messages API shape (anthropic_protocol): the prompt is "
        "the system prompt, tool schemas and block texts joined; runs to max_tokens or to the emulated EOS. "
        "With tools, one tool_use block per answer by the same rule as chat completions (stop_reason "
        "tool_use), then text. stream=true answers with Anthropic's named events, one delta per engine step.",
        responses=_ERROR_RESPONSES,
        response_model=MessageResponse,
    )
    async def create_message(body: MessagesRequest, request: Request) -> MessageResponse | Response:
        server.check_request(body)
        if body.max_tokens is None:
            raise EngineError(400, "BadRequestError", "max_tokens: Field required", "max_tokens")
        token_ids = await server.tokenize(body.prompt_text())
        response_id = f"msg_{_base_request_id(request)}"
        planned = plan_tool_call(body.openai_messages(), body.openai_tools(), body.openai_tool_choice())
        eos_after = server.tool_call_tokens(planned) if planned else None
        engine_request = server.engine_request(body, response_id, token_ids, body.max_tokens, eos_after)
        block: ContentBlock = (
            {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex}", "name": planned.name}
            | {"input": json.loads(planned.arguments)}
            if planned
            else {"type": "text", "text": server.output_text(engine_request.output_tokens)}
        )

        def usage(result: EngineResult) -> MessagesUsage:
            return messages_usage(engine_request.prompt_tokens, result.cached_tokens, result.completion_tokens)

        if body.stream:
            events = message_events(
                {"id": response_id, "model": config.served_model_name},
                server.token_stream(request, engine_request),
                block=block,
                total_tokens=engine_request.output_tokens,
                usage=usage,
                opening=lambda cached: messages_usage(engine_request.prompt_tokens, cached, 0),
            )
            return StreamingResponse(events, media_type=EVENT_STREAM)
        result = await server.run(request, engine_request)
        return MessageResponse(
            id=response_id,
            model=config.served_model_name,
            content=[block],
            stop_reason="tool_use" if planned else STOP_REASONS.get(result.finish_reason, "end_turn"),
            usage=usage(result),
        )

    @app.post(
        "/v1/messages/count_tokens",
        operation_id="count_message_tokens",
        description="The tokens a Messages request's prompt takes (as /v1/messages counts them); runs nothing.",
        responses=_ERROR_RESPONSES,
        response_model=TokenCount,
    )
    async def count_message_tokens(body: MessagesRequest) -> TokenCount:
        return TokenCount(input_tokens=len(await server.tokenize(body.prompt_text())))

    return app
