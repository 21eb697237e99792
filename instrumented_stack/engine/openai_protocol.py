"""The subset of the OpenAI-compatible API (as vLLM serves it) that the emulator speaks.

Requests may carry more fields than declared here (vLLM extras such as ``ignore_eos``, ``top_k``,
``stop``); they are accepted and ignored, because the emulator has no model to apply them to.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

COMPLETIONS_DEFAULT_MAX_TOKENS = 16
"""``max_tokens`` of ``/v1/completions`` when the request gives none (OpenAI's and vLLM's default)."""


class SamplingFields(BaseModel):
    """Fields shared by both endpoints; ``None`` means the server default."""

    model: str = Field(description="served model name; must match the engine's")
    temperature: float | None = Field(default=None, ge=0, description="sampling temperature (default 1.0)")
    top_p: float | None = Field(default=None, gt=0, le=1, description="nucleus sampling mass (default 1.0)")
    n: int = Field(default=1, ge=1, description="sequences per prompt; the emulator serves 1")
    stream: bool = Field(default=False, description="server-sent events; not emulated")


class CompletionRequest(SamplingFields):
    """``POST /v1/completions``: one prompt, as text or as token ids."""

    prompt: str | list[int] = Field(description="prompt text, or prompt token ids")
    max_tokens: int | None = Field(default=None, ge=1, description="tokens to generate (default 16)")


class TextPart(BaseModel):
    """One text part of a multi-part chat message content."""

    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    """A chat message; ``content`` is text or a list of text parts."""

    role: str
    content: str | list[TextPart] | None = None

    def text(self) -> str:
        """The message content as one text (parts joined by spaces; empty when there is none)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return " ".join(part.text for part in self.content)


class ChatCompletionRequest(SamplingFields):
    """``POST /v1/chat/completions``."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1, description="tokens to generate")
    max_tokens: int | None = Field(
        default=None, ge=1, description="deprecated alias of max_completion_tokens (default: rest of context)"
    )


class UsageInfo(BaseModel):
    """Token usage of one response."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


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
    message: ChatMessage
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
