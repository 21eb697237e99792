"""The subset of OpenAI's Responses API that the emulator speaks (``POST /v1/responses``), as vLLM serves it.

Clients built on the Responses API (the Codex CLI, whose providers must speak it; the OpenAI Agents SDK's default
model; ``client.responses.create``) talk to an OpenAI-compatible server through this shape. Shapes follow OpenAI's
API reference ("Responses", "Streaming events"):

- request: ``model``, ``input`` (a string, or items: messages ``{"role", "content"}`` with or without
  ``"type": "message"``, ``function_call`` ``{"call_id", "name", "arguments"}``, ``function_call_output``
  ``{"call_id", "output"}``), ``instructions``, ``tools`` (``{"type": "function", "name", "parameters"}``, and
  ``{"type": "namespace", "name", "tools": [function tools]}``, as Codex groups each MCP server's tools in one
  namespace ``mcp__<server>``; other tool types, and namespaces not named ``mcp__*``, are accepted and never
  called), ``tool_choice``,
  ``max_output_tokens``, ``stream``. Other fields (``reasoning``, ``store``, ``include``, ``prompt_cache_key``,
  ``text`` ...) are accepted and ignored.
- usage: ``input_tokens`` (the whole prompt), ``input_tokens_details.cached_tokens`` (from the prefix cache),
  ``output_tokens``, ``output_tokens_details.reasoning_tokens`` (0: no reasoning), ``total_tokens``.

The emulated model's choice of tool is :mod:`tool_calls`' rule over the same conversation in chat shape
(:meth:`ResponsesRequest.chat_messages`, :meth:`ResponsesRequest.chat_tools`): a ``function_call_output`` is a
tool answer, a user message a new question. An MCP server's function is offered to that rule as
``<namespace>.<name>`` (a function name cannot hold a dot), and a call of it answers a ``function_call`` with
``namespace`` and ``name`` apart (:func:`function_call_name`), the shape Codex reads. Only MCP namespaces: Codex
also offers its sub-agent tools as a namespace (``multi_agent_v1``), which the captures of its turns
(``tests/realworld/captures/codex``, 8 model requests a turn) were taken without calling.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Item = dict[str, Any]
NAMESPACE_SEPARATOR = "."
MCP_NAMESPACE_PREFIX = "mcp__"


class ResponsesRequest(BaseModel):
    """``POST /v1/responses``."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(description="served model name; must match the engine's")
    input: str | list[Item] = Field(description="the conversation: a user message, or input items, oldest first")
    instructions: str | None = Field(default=None, description="system (developer) instructions")
    tools: list[dict[str, Any]] | None = Field(default=None, description="tools the model may call")
    tool_choice: str | dict[str, Any] | None = Field(default=None, description='"auto", "none", "required" or one')
    max_output_tokens: int | None = Field(default=None, ge=1, description="tokens to generate")
    temperature: float | None = Field(default=None, ge=0, description="sampling temperature (default 1.0)")
    top_p: float | None = Field(default=None, gt=0, le=1, description="nucleus sampling mass (default 1.0)")
    stream: bool = Field(default=False, description="answer as server-sent events, one delta per engine step")

    @property
    def n(self) -> int:
        """One answer per request, as the Responses API always gives."""
        return 1

    def items(self) -> list[Item]:
        """The input as items (a string is one user message)."""
        if isinstance(self.input, str):
            return [{"type": "message", "role": "user", "content": self.input}]
        return self.input

    def prompt_text(self) -> str:
        """The text the engine tokenizes: instructions, tool schemas and every item's text, joined."""
        parts = [self.instructions or ""]
        parts += [json.dumps(tool, separators=(",", ":"), sort_keys=True) for tool in self.tools or ()]
        parts += [_item_text(item) for item in self.items()]
        return " ".join(part for part in parts if part)

    def chat_messages(self) -> list[dict[str, Any]]:
        """The conversation as chat messages (``role``, ``content`` text, ``tool_calls``), for :mod:`tool_calls`."""
        messages: list[dict[str, Any]] = []
        for item in self.items():
            kind = item.get("type", "message")
            if kind == "function_call":
                name = _qualified(item.get("namespace"), str(item.get("name", "")))
                messages.append({"role": "assistant", "tool_calls": [{"function": {"name": name}}]})
            elif kind == "function_call_output":
                messages.append({"role": "tool"})
            elif kind == "message":
                role = item.get("role", "user")
                messages.append(
                    {"role": "system" if role in ("system", "developer") else role, "content": _item_text(item)}
                )
        return messages

    def chat_tools(self) -> list[dict[str, Any]]:
        """Function tools in chat shape, an MCP namespace's as ``<namespace>.<name>``; other tool types are never
        called."""
        functions = [(None, tool) for tool in self.tools or ()]
        for tool in self.tools or ():
            if tool.get("type") == "namespace" and str(tool.get("name", "")).startswith(MCP_NAMESPACE_PREFIX):
                functions += [(tool.get("name"), member) for member in tool.get("tools") or ()]
        return [
            {
                "type": "function",
                "function": {"name": _qualified(namespace, tool["name"]), "parameters": tool.get("parameters")},
            }
            for namespace, tool in functions
            if tool.get("type") == "function" and "name" in tool
        ]

    def chat_tool_choice(self) -> str | dict[str, Any] | None:
        """``tool_choice`` in chat spelling: ``none``, a named function, or ``None`` (auto/required)."""
        if self.tool_choice == "none":
            return "none"
        if isinstance(self.tool_choice, dict) and self.tool_choice.get("name"):
            return {"type": "function", "function": {"name": self.tool_choice["name"]}}
        return None


def function_call_name(planned: str) -> dict[str, str]:
    """A ``function_call`` item's ``name`` (and ``namespace``, for a namespace's function) from the name
    :meth:`ResponsesRequest.chat_tools` gave it."""
    namespace, separator, name = planned.rpartition(NAMESPACE_SEPARATOR)
    return {"namespace": namespace, "name": name} if separator else {"name": name}


def _qualified(namespace: object, name: str) -> str:
    return f"{namespace}{NAMESPACE_SEPARATOR}{name}" if namespace else name


def responses_usage(prompt_tokens: int, cached_tokens: int, output_tokens: int) -> dict[str, Any]:
    """The Responses API's usage object (``input_tokens`` counts the whole prompt)."""
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": cached_tokens},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt_tokens + output_tokens,
    }


def response_object(head: dict[str, Any], output: list[Item], status: str, usage: dict[str, Any] | None) -> Item:
    """A ``response`` object: ``head`` (``id``, ``created_at``, ``model``, and the request's ``instructions``,
    ``tools`` and ``tool_choice``, echoed as the API does) with its ``output`` items."""
    return {
        "instructions": None,
        "tools": [],
        "tool_choice": "auto",
        **head,
        "object": "response",
        "status": status,
        "output": output,
        "usage": usage,
        "error": None,
        "incomplete_details": None,
        "metadata": {},
        "parallel_tool_calls": False,
    }


def _item_text(item: Item) -> str:
    kind = item.get("type", "message")
    if kind == "function_call":
        return f"{item.get('name', '')} {item.get('arguments', '')}"
    if kind == "function_call_output":
        output = item.get("output", "")
        return output if isinstance(output, str) else json.dumps(output)
    content = item.get("content", "")
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
