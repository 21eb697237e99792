"""The agent's LLM client: an OpenAI-compatible chat call with a GenAI-semconv CLIENT span.

The span follows the OpenTelemetry GenAI semantic conventions for inference spans
(``gen-ai-spans.md``, now in open-telemetry/semantic-conventions-genai): name ``chat {model}``, kind
CLIENT, ``gen_ai.operation.name=chat``, ``gen_ai.provider.name``, ``gen_ai.request.*``, then
``gen_ai.response.*`` and ``gen_ai.usage.input_tokens``/``output_tokens`` from the response's usage;
on failure ``error.type`` and status ERROR.

This span is the HTTP client span of the call: the W3C context is injected while it is current, so the
engine's ``llm_request`` is its direct child. The HTTP client is deliberately not auto-instrumented,
which would add a second CLIENT span between the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from opentelemetry import propagate
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"

PROVIDER_NAME = "vllm"
"""``gen_ai.provider.name``: vLLM is not in the semconv's well-known list, so a custom value."""


class LlmError(Exception):
    """The LLM call failed: transport error or non-2xx status.

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
        text: the assistant message content.
        finish_reason: why generation stopped (``length``, ``stop``, ...).
        input_tokens, output_tokens: usage reported by the server.
    """

    response_id: str
    model: str
    text: str
    finish_reason: str
    input_tokens: int
    output_tokens: int


class LlmClient:
    """Chat completions against one OpenAI-compatible base URL.

    Args:
        http: an async client whose ``base_url`` is the server root (e.g. ``http://127.0.0.1:8000``);
            the caller owns and closes it.
        tracer: the calling service's tracer.
        model: model name sent as ``model`` and reported as ``gen_ai.request.model``.

    Use from one event loop; calls may run concurrently.
    """

    def __init__(self, http: httpx.AsyncClient, tracer: Tracer, model: str) -> None:
        self._http = http
        self._tracer = tracer
        self._model = model
        url = urlsplit(str(http.base_url))
        self._server_address = url.hostname or ""
        self._server_port = url.port or (443 if url.scheme == "https" else 80)

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float,
        top_p: float,
        ignore_eos: bool = False,
    ) -> ChatResult:
        """``POST /v1/chat/completions`` inside a ``chat {model}`` CLIENT span.

        Args:
            messages: OpenAI chat messages (``role``, ``content``).
            max_tokens: most tokens to generate (sent as ``max_tokens``).
            temperature, top_p: sampling parameters.
            ignore_eos: vLLM's sampling extra: generate exactly ``max_tokens`` (used to replay a
                workload's output lengths).

        Raises:
            LlmError: transport failure, non-2xx response, or a body that is not a chat completion.
        """
        attributes: dict[str, AttributeValue] = {
            GEN_AI_OPERATION_NAME: "chat",
            GEN_AI_PROVIDER_NAME: PROVIDER_NAME,
            GEN_AI_REQUEST_MODEL: self._model,
            GEN_AI_REQUEST_MAX_TOKENS: max_tokens,
            GEN_AI_REQUEST_TEMPERATURE: temperature,
            GEN_AI_REQUEST_TOP_P: top_p,
            SERVER_ADDRESS: self._server_address,
            SERVER_PORT: self._server_port,
        }
        body = {
            "model": self._model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "ignore_eos": ignore_eos,
        }
        with self._tracer.start_as_current_span(
            f"chat {self._model}",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            headers: dict[str, str] = {}
            propagate.inject(headers)
            try:
                response = await self._http.post("/v1/chat/completions", json=body, headers=headers)
            except httpx.HTTPError as error:
                raise _failed(span, type(error).__qualname__, f"LLM call failed: {error!r}", None) from error
            if response.is_error:
                message = f"LLM answered {response.status_code}: {response.text[:200]}"
                raise _failed(span, str(response.status_code), message, response.status_code)
            try:
                result = _parse_chat_response(response.json(), self._model)
            except (ValueError, TypeError, AttributeError, LookupError) as error:
                message = f"LLM response is not a chat completion: {error}"
                raise _failed(span, "invalid_response", message, response.status_code) from error
            span.set_attributes(
                {
                    GEN_AI_RESPONSE_ID: result.response_id,
                    GEN_AI_RESPONSE_MODEL: result.model,
                    GEN_AI_RESPONSE_FINISH_REASONS: [result.finish_reason],
                    GEN_AI_USAGE_INPUT_TOKENS: result.input_tokens,
                    GEN_AI_USAGE_OUTPUT_TOKENS: result.output_tokens,
                }
            )
            return result


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
    return ChatResult(
        response_id=str(payload.get("id", "")),
        model=str(payload.get("model") or requested_model),
        text=str((choice.get("message") or {}).get("content") or ""),
        finish_reason=str(choice.get("finish_reason")),
        input_tokens=int(usage.get("prompt_tokens", 0)),
        output_tokens=int(usage.get("completion_tokens", 0)),
    )
