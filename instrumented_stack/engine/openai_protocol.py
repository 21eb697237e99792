"""The subset of the OpenAI-compatible API (as vLLM serves it) that the emulator speaks.

Requests may carry more fields than declared here (vLLM extras such as ``ignore_eos``, ``top_k``,
``stop``); they are accepted and ignored, because the emulator has no model to apply them to.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

COMPLETIONS_DEFAULT_MAX_TOKENS = 16
"""``max_tokens`` of ``/v1/completions`` when the request gives none (OpenAI's and vLLM's default)."""


class StreamOptions(BaseModel):
    """``stream_options``: ``include_usage`` adds a last chunk with ``usage`` and no choices."""

    include_usage: bool = False


class SamplingFields(BaseModel):
    """Fields shared by both endpoints; ``None`` means the server default."""

    model: str = Field(description="served model name; must match the engine's")
    temperature: float | None = Field(default=None, ge=0, description="sampling temperature (default 1.0)")
    top_p: float | None = Field(default=None, gt=0, le=1, description="nucleus sampling mass (default 1.0)")
    n: int = Field(default=1, ge=1, description="sequences per prompt; the emulator serves 1")
    stream: bool = Field(default=False, description="answer as server-sent events, one chunk per engine step")
    stream_options: StreamOptions | None = Field(default=None, description="streaming options")


class CompletionRequest(SamplingFields):
    """``POST /v1/completions``: one prompt, as text or as token ids."""

    prompt: str | list[int] = Field(description="prompt text, or prompt token ids")
    max_tokens: int | None = Field(default=None, ge=1, description="tokens to generate (default 16)")


class TextPart(BaseModel):
    """One text part of a multi-part chat message content."""

    type: Literal["text"]
    text: str


class FunctionCall(BaseModel):
    """The function of a tool call: its name and its arguments as a JSON text."""

    name: str
    arguments: str


class ToolCall(BaseModel):
    """One tool call of an assistant message."""

    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class FunctionDefinition(BaseModel):
    """A function tool the model may call; ``parameters`` is a JSON Schema."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDefinition(BaseModel):
    """One entry of a chat request's ``tools``."""

    type: Literal["function"] = "function"
    function: FunctionDefinition


class ChatMessage(BaseModel):
    """A chat message of a request; ``content`` is text or a list of text parts. Assistant messages may carry
    ``tool_calls``; ``tool`` messages answer one by ``tool_call_id``."""

    role: str
    content: str | list[TextPart] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    def text(self) -> str:
        """The message as one prompt text: content parts and tool calls (name, arguments) joined by spaces."""
        parts: list[str] = []
        if isinstance(self.content, str):
            parts.append(self.content)
        elif self.content is not None:
            parts.extend(part.text for part in self.content)
        for call in self.tool_calls or ():
            parts.extend((call.function.name, call.function.arguments))
        return " ".join(part for part in parts if part)


class AssistantMessage(BaseModel):
    """The answer's message: text, or ``tool_calls`` with ``content`` null (vLLM sends ``[]`` for none)."""

    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ChatCompletionRequest(SamplingFields):
    """``POST /v1/chat/completions``."""

    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ToolDefinition] | None = Field(default=None, description="function tools the model may call")
    tool_choice: str | dict[str, Any] | None = Field(
        default=None, description='"none", "auto", "required" or {"type": "function", "function": {"name"}}'
    )
    max_completion_tokens: int | None = Field(default=None, ge=1, description="tokens to generate")
    max_tokens: int | None = Field(
        default=None, ge=1, description="deprecated alias of max_completion_tokens (default: rest of context)"
    )


class PromptTokensDetails(BaseModel):
    """``cached_tokens``: prompt tokens served from the prefix cache (vLLM with ``--enable-prompt-tokens-details``)."""

    cached_tokens: int


class UsageInfo(BaseModel):
    """Token usage of one response."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails | None = None


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: None = None
    finish_reason: str
    stop_reason: None = None


class CompletionResponse(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int = Field(description="Unix time in seconds")
    model: str
    choices: list[CompletionChoice]
    usage: UsageInfo


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    finish_reason: str
    stop_reason: None = None


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(description="Unix time in seconds")
    model: str
    choices: list[ChatChoice]
    usage: UsageInfo


class ErrorInfo(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: int


class ErrorResponse(BaseModel):
    """Error body: ``{"error": {"message", "type", "param", "code"}}``."""

    error: ErrorInfo
