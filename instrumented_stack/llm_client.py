"""The agent's LLM client: tokenize, call an OpenAI-compatible chat endpoint, parse the answer.

One call records (names and attributes from the GenAI semconv inference span, ``gen-ai-spans.md``):

- ``chat {model}`` (CLIENT): ``gen_ai.operation.name=chat``, ``gen_ai.provider.name``,
  ``gen_ai.request.*``, ``server.address``/``server.port``, ``llm.prompt.sha256`` (first 16 hex digits of
  the prompt's SHA-256: equal prompts sent twice have equal values), then ``gen_ai.response.*``,
  ``gen_ai.usage.input_tokens``/``output_tokens`` and ``gen_ai.usage.cache_read.input_tokens`` (the prompt tokens
  the server's prefix cache served, OpenAI's ``usage.prompt_tokens_details.cached_tokens``, which vLLM reports); on
  failure ``error.type`` and status ERROR.
  - ``tokenize`` (INTERNAL): the prompt tokenized by a tokenizer worker (``llm.prompt_tokens``,
    ``llm.tokenizer.worker``), with a ``load_tokenizer`` child when the worker had to load it first;
  - ``connect`` and ``tls_handshake`` (INTERNAL) when the call opened a new connection
    (``http_tracing``);
  - the engine's ``llm_request`` (SERVER, remote child): the W3C context is injected while ``chat`` is
    current, and the HTTP client is deliberately not auto-instrumented, which would put a second CLIENT
    span between the two;
  - ``parse_output`` (INTERNAL): decoding the response body (``llm.output.chars``).

Connections: ``pooled`` keeps one ``httpx.AsyncClient`` (keep-alive) for the client's life;
``per_request`` opens a new client, and so a new TCP connection (and TLS handshake for ``https``), per call
and closes it after. The client checks prompt + ``max_tokens`` against ``max_model_len`` before sending,
which is why it tokenizes at all.
"""

from __future__ import annotations

import hashlib
import ssl
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import urlsplit

import httpx
from opentelemetry import propagate
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue
from pydantic import BaseModel, ConfigDict, Field

from instrumented_stack.http_tracing import connection_trace
from instrumented_stack.semconv import (
    ERROR_TYPE,
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MAX_TOKENS,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_REQUEST_TEMPERATURE,
    GEN_AI_REQUEST_TOP_P,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_ID,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    LLM_OUTPUT_CHARS,
    LLM_PROMPT_SHA256,
    LLM_PROMPT_TOKENS,
    LLM_TOKENIZER_WORKER,
    SERVER_ADDRESS,
    SERVER_PORT,
)
from instrumented_stack.tokenizer_workers import TokenizerWorkers

PROVIDER_NAME = "vllm"
"""``gen_ai.provider.name``: vLLM is not in the semconv's well-known list, so a custom value."""

ConnectionMode = Literal["pooled", "per_request"]


ENGINE_KEEPALIVE_EXPIRY_S = 4.0
"""Seconds the pool keeps an idle connection to the engine: under vLLM's API server's own idle timeout
(``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``, 5 s), so the client drops an idle connection before the server closes it under a
request (a bare ``ReadError``)."""


class LlmClientConfig(BaseModel):
    """Settings of the LLM client."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = Field(description="root URL of the OpenAI-compatible server (http or https)")
    model: str = Field(min_length=1, description="model name sent and reported as gen_ai.request.model")
    connection: ConnectionMode = Field(default="pooled", description="pooled keep-alive or a new one per call")
    ca_file: Path | None = Field(default=None, description="PEM CA bundle to trust for https; None: system CAs")
    timeout_s: float = Field(default=300.0, gt=0, description="per-call timeout in seconds")
    max_model_len: int = Field(default=131072, ge=2, description="prompt + max_tokens limit checked before sending")
    tokenizer_workers: int = Field(default=4, ge=1, description="tokenizer workers (each loads lazily)")
    tokenizer_max_requests: int | None = Field(
        default=None, ge=1, description="recycle a tokenizer worker after this many requests; None: never"
    )


class LlmError(Exception):
    """The LLM call failed: prompt too long, transport error, non-2xx status or an unreadable body.

    Attributes:
        status: the HTTP status, or ``None`` when no response came back.
    """

    def __init__(self, message: str, status: int | None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class ChatResult:
    """What a chat call returned.

    Attributes:
        response_id: the server's completion id (``chatcmpl-...``).
        model: the model that answered.
        text: the assistant message content, stripped.
        finish_reason: why generation stopped (``length``, ``stop``, ...).
        input_tokens, output_tokens: usage reported by the server.
        cached_input_tokens: prompt tokens served from the server's prefix cache, when it reports them.
    """

    response_id: str
    model: str
    text: str
    finish_reason: str
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int | None = None


def prompt_signature(prompt: str) -> str:
    """First 16 hex digits of the SHA-256 of ``prompt`` (UTF-8)."""
    return hashlib.sha256(prompt.encode()).hexdigest()[:16]


class LlmClient:
    """Chat completions against one OpenAI-compatible server; an async context manager.

    Args:
        config: connection, timeout, tokenizer workers.
        tracer: the calling service's tracer.
        tokenizer_path: the ``tokenizer.json`` the workers load.

    Use ``async with`` on one event loop; calls may run concurrently.
    """

    def __init__(self, config: LlmClientConfig, tracer: Tracer, tokenizer_path: Path) -> None:
        self._config = config
        self._tracer = tracer
        self._tokenizers = TokenizerWorkers(
            tokenizer_path, config.tokenizer_workers, config.tokenizer_max_requests, tracer=tracer
        )
        url = urlsplit(config.base_url)
        self._server_address = url.hostname or ""
        self._server_port = url.port or (443 if url.scheme == "https" else 80)
        self._verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=str(config.ca_file)) if config.ca_file else True
        )
        self._pooled: httpx.AsyncClient | None = None

    async def __aenter__(self) -> Self:
        if self._config.connection == "pooled":
            self._pooled = self._new_http_client()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._pooled is not None:
            await self._pooled.aclose()
            self._pooled = None

    def _new_http_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self._config.base_url,
            timeout=self._config.timeout_s,
            verify=self._verify,
            limits=httpx.Limits(keepalive_expiry=ENGINE_KEEPALIVE_EXPIRY_S),
        )

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float,
        top_p: float,
        ignore_eos: bool = False,
    ) -> ChatResult:
        """``POST /v1/chat/completions`` inside a ``chat {model}`` CLIENT span (see the module docstring).

        Args:
            messages: OpenAI chat messages (``role``, ``content``); the prompt is their contents joined by
                spaces, as the engine joins them.
            max_tokens: most tokens to generate.
            temperature, top_p: sampling parameters.
            ignore_eos: vLLM's sampling extra: generate exactly ``max_tokens``.

        Raises:
            LlmError: prompt + ``max_tokens`` over ``max_model_len``, transport failure, non-2xx response,
                or a body that is not a chat completion.
        """
        model = self._config.model
        prompt = " ".join(message["content"] for message in messages)
        attributes: dict[str, AttributeValue] = {
            GEN_AI_OPERATION_NAME: "chat",
            GEN_AI_PROVIDER_NAME: PROVIDER_NAME,
            GEN_AI_REQUEST_MODEL: model,
            GEN_AI_REQUEST_MAX_TOKENS: max_tokens,
            GEN_AI_REQUEST_TEMPERATURE: temperature,
            GEN_AI_REQUEST_TOP_P: top_p,
            SERVER_ADDRESS: self._server_address,
            SERVER_PORT: self._server_port,
            LLM_PROMPT_SHA256: prompt_signature(prompt),
        }
        body = {
            "model": model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "ignore_eos": ignore_eos,
        }
        with self._tracer.start_as_current_span(
            f"chat {model}",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            prompt_tokens = self._tokenize(prompt)
            if prompt_tokens + max_tokens > self._config.max_model_len:
                message = f"prompt ({prompt_tokens}) + max_tokens ({max_tokens}) exceed {self._config.max_model_len}"
                raise _failed(span, "context_length_exceeded", message, None)
            response = await self._post(span, body)
            with self._tracer.start_as_current_span("parse_output", kind=SpanKind.INTERNAL) as parse_span:
                try:
                    result = _parse_chat_response(response.json(), model)
                except (ValueError, TypeError, AttributeError, LookupError) as error:
                    message = f"LLM response is not a chat completion: {error}"
                    raise _failed(span, "invalid_response", message, response.status_code) from error
                parse_span.set_attribute(LLM_OUTPUT_CHARS, len(result.text))
            span.set_attributes(
                {
                    GEN_AI_RESPONSE_ID: result.response_id,
                    GEN_AI_RESPONSE_MODEL: result.model,
                    GEN_AI_RESPONSE_FINISH_REASONS: [result.finish_reason],
                    GEN_AI_USAGE_INPUT_TOKENS: result.input_tokens,
                    GEN_AI_USAGE_OUTPUT_TOKENS: result.output_tokens,
                }
            )
            if result.cached_input_tokens is not None:
                span.set_attribute(GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, result.cached_input_tokens)
            return result

    def _tokenize(self, prompt: str) -> int:
        with self._tracer.start_as_current_span("tokenize", kind=SpanKind.INTERNAL) as span:
            lease = self._tokenizers.lease()
            count = len(lease.tokenizer.encode(prompt))
            span.set_attributes({LLM_PROMPT_TOKENS: count, LLM_TOKENIZER_WORKER: lease.worker})
            return count

    async def _post(self, span: Span, body: dict[str, Any]) -> httpx.Response:
        headers: dict[str, str] = {}
        propagate.inject(headers)
        extensions = {"trace": connection_trace(self._tracer)}
        try:
            if self._pooled is not None:
                response = await self._pooled.post(
                    "/v1/chat/completions", json=body, headers=headers, extensions=extensions
                )
            else:
                async with self._new_http_client() as http:
                    response = await http.post(
                        "/v1/chat/completions", json=body, headers=headers, extensions=extensions
                    )
        except httpx.HTTPError as error:
            raise _failed(span, type(error).__qualname__, f"LLM call failed: {error!r}", None) from error
        if response.is_error:
            message = f"LLM answered {response.status_code}: {response.text[:200]}"
            raise _failed(span, str(response.status_code), message, response.status_code)
        return response


def _failed(span: Span, error_type: str, message: str, status: int | None) -> LlmError:
    """Mark ``span`` failed (``error.type``, status ERROR) and return the error to raise."""
    span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, message))
    return LlmError(message, status)


def _parse_chat_response(payload: dict[str, Any], requested_model: str) -> ChatResult:
    """A :class:`ChatResult` from a chat completion body.

    Raises:
        ValueError, TypeError, AttributeError, LookupError: the body is not a chat completion.
    """
    choice = payload["choices"][0]
    usage = payload.get("usage") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    return ChatResult(
        response_id=str(payload.get("id", "")),
        model=str(payload.get("model") or requested_model),
        text=str((choice.get("message") or {}).get("content") or "").strip(),
        finish_reason=str(choice.get("finish_reason")),
        input_tokens=int(usage.get("prompt_tokens", 0)),
        output_tokens=int(usage.get("completion_tokens", 0)),
        cached_input_tokens=None if cached is None else int(cached),
    )
