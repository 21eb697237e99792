"""The subset of Anthropic's Messages API that the emulator speaks (``POST /v1/messages``).

Agents written for Anthropic's API (Claude Code, the Claude Agent SDK, the ``anthropic`` SDKs) talk to an
OpenAI-compatible server through this shape instead; recent vLLM releases serve it beside the OpenAI routes
(``vllm/entrypoints/anthropic``), and so do LiteLLM's proxy and SGLang. Shapes follow Anthropic's API
reference ("Messages", "Streaming Messages", "Count message tokens"):

- request: ``model``, ``max_tokens`` (required), ``messages`` of ``{"role": "user" | "assistant",
  "content": str | [block]}`` with blocks ``text``, ``tool_use`` (``id``, ``name``, ``input``) and
  ``tool_result`` (``tool_use_id``, ``content``); ``system`` (a string or text blocks); ``tools`` of
  ``{"name", "description", "input_schema"}``; ``tool_choice`` ``{"type": "auto" | "any" | "tool" | "none"}``;
  ``stream``. Other fields (``metadata``, ``thinking``, ``cache_control`` on blocks, server tools' ``type``)
  are accepted and ignored, as the emulator has no model to apply them to.
- usage: ``input_tokens`` counts only the prompt tokens **not** read from the cache;
  ``cache_read_input_tokens`` the cached ones; ``cache_creation_input_tokens`` is 0 (vLLM's prefix cache
  needs no explicit write). Their sum is the prompt.

The emulated model's choice of tool is :mod:`tool_calls`' rule over the same conversation in OpenAI's shape
(:meth:`MessagesRequest.openai_messages`, :meth:`MessagesRequest.openai_tools`): a user turn made only of
``tool_result`` blocks is a tool answer, not a new user question.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ContentBlock = dict[str, Any]


class MessageParam(BaseModel):
    """One conversation turn: ``content`` is a string or a list of content blocks (plain mappings)."""

    model_config = ConfigDict(extra="allow")

    role: Literal["user", "assistant"]
    content: str | list[ContentBlock]

    def blocks(self) -> list[ContentBlock]:
        """The content as blocks (a string is one ``text`` block)."""
        return [{"type": "text", "text": self.content}] if isinstance(self.content, str) else self.content


class MessagesRequest(BaseModel):
    """``POST /v1/messages`` (and ``/v1/messages/count_tokens``, which needs no ``max_tokens``)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(description="served model name; must match the engine's")
    max_tokens: int | None = Field(default=None, ge=1, description="tokens to generate (required to generate)")
    messages: list[MessageParam] = Field(min_length=1, description="the conversation, oldest first")
    system: str | list[ContentBlock] | None = Field(default=None, description="system prompt")
    tools: list[dict[str, Any]] | None = Field(default=None, description="tools the model may call")
    tool_choice: dict[str, Any] | None = Field(default=None, description='{"type": "auto"|"any"|"tool"|"none"}')
    temperature: float | None = Field(default=None, ge=0, le=1, description="sampling temperature (default 1.0)")
    top_p: float | None = Field(default=None, gt=0, le=1, description="nucleus sampling mass (default 1.0)")
    stream: bool = Field(default=False, description="answer as server-sent events, one delta per engine step")

    @property
    def n(self) -> int:
        """One answer per request, as the Messages API always gives."""
        return 1

    def prompt_text(self) -> str:
        """The text the engine tokenizes: system prompt, tool schemas and every block's text, joined."""
        parts = [_text(self.system)] if self.system else []
        parts += [json.dumps(tool, separators=(",", ":"), sort_keys=True) for tool in self.tools or ()]
        for message in self.messages:
            parts += [_block_text(block) for block in message.blocks()]
        return " ".join(part for part in parts if part)

    def openai_messages(self) -> list[dict[str, Any]]:
        """The conversation as OpenAI chat messages (``role``, ``content`` text, ``tool_calls``), for
        :mod:`tool_calls`."""
        converted: list[dict[str, Any]] = []
        for message in self.messages:
            blocks = message.blocks()
            if message.role == "assistant":
                calls = [
                    {"id": block.get("id"), "function": {"name": block.get("name", "")}}
                    for block in blocks
                    if block.get("type") == "tool_use"
                ]
                converted.append({"role": "assistant", "tool_calls": calls})
            elif blocks and all(block.get("type") == "tool_result" for block in blocks):
                converted.append({"role": "tool"})
            else:
                converted.append({"role": "user", "content": " ".join(_block_text(block) for block in blocks)})
        return converted

    def openai_tools(self) -> list[dict[str, Any]]:
        """Client tools as OpenAI function tools; server tools (a ``type`` other than ``custom``) are left out."""
        return [
            {"type": "function", "function": {"name": tool["name"], "parameters": tool.get("input_schema")}}
            for tool in self.tools or ()
            if tool.get("type", "custom") == "custom" and "name" in tool
        ]

    def openai_tool_choice(self) -> str | dict[str, Any] | None:
        """``tool_choice`` in OpenAI's spelling: ``none``, a named function, or ``None`` (auto/any)."""
        choice = (self.tool_choice or {}).get("type")
        if choice == "none":
            return "none"
        if choice == "tool":
            return {
                "type": "function",
                "function": {"name": self.tool_choice.get("name") if self.tool_choice else None},
            }
        return None


class MessagesUsage(BaseModel):
    """Token usage; ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens`` is the prompt."""

    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0


def messages_usage(prompt_tokens: int, cached_tokens: int, output_tokens: int) -> MessagesUsage:
    """Anthropic's usage of one answer from the engine's counts (``cached_tokens`` <= ``prompt_tokens``)."""
    return MessagesUsage(
        input_tokens=prompt_tokens - cached_tokens, output_tokens=output_tokens, cache_read_input_tokens=cached_tokens
    )


class MessageResponse(BaseModel):
    """A non-streamed answer: ``content`` is one ``text`` block or one ``tool_use`` block."""

    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    model: str
    content: list[ContentBlock]
    stop_reason: Literal["end_turn", "max_tokens", "tool_use"]
    stop_sequence: None = None
    usage: MessagesUsage


class TokenCount(BaseModel):
    """``POST /v1/messages/count_tokens``: the prompt's tokens."""

    input_tokens: int


STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}
"""The engine's ``finish_reason`` as a Messages ``stop_reason`` (a tool call is ``tool_use``)."""


def _text(system: str | list[ContentBlock]) -> str:
    return system if isinstance(system, str) else " ".join(_block_text(block) for block in system)


def _block_text(block: ContentBlock) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        return f"{block.get('name', '')} {json.dumps(block.get('input', {}), separators=(',', ':'))}"
    if kind == "tool_result":
        content = block.get("content", "")
        return content if isinstance(content, str) else " ".join(_block_text(part) for part in content)
    return ""
