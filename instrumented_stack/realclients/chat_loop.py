"""A hand-written agent loop over the OpenAI Python SDK, the way applications without a framework write one.

The model is offered the two tools; while it answers with ``tool_calls``, the app runs each tool (inside a
tool span of the instrumentation's convention, which the caller opens: the SDK instrumentations trace the
LLM calls only) and sends the results back; it stops at the first text answer. Against the emulator that is
three LLM calls per request (``engine.tool_calls``). Streaming reads the chunks and assembles the tool
calls as the SDK's delta format gives them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import openai

from instrumented_stack.realclients.common import (
    SYSTEM_PROMPT,
    TOOL_DESCRIPTIONS,
    TOOL_ORDER,
    TOOL_SHIPPING,
    DriverRun,
)

MAX_LLM_CALLS = 6
"""Ends a loop that would not stop (the emulator ends after each offered tool was called once)."""

ToolSpan = Callable[[str, str, str], AbstractContextManager[Any]]
"""Opens the tool span of one call: ``(tool name, call id, arguments JSON)``."""

ToolSpanShape = Callable[[str, str, str], tuple[str, dict[str, str]]]
"""The name and attributes of the tool span of one call ``(tool name, call id, arguments JSON)``, in a
convention's spelling."""

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": TOOL_ORDER,
            "description": TOOL_DESCRIPTIONS[TOOL_ORDER],
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": TOOL_SHIPPING,
            "description": TOOL_DESCRIPTIONS[TOOL_SHIPPING],
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
]


def run_chat_requests(run: DriverRun, tool_span_shape: ToolSpanShape) -> None:
    """Run the driver's user requests, each through :func:`run_chat_loop`, on one OpenAI client (created after
    the caller instrumented the SDK) whose HTTP goes through the run's recording transport. Tool runs are
    INTERNAL spans of the driver's tracer, named and attributed by ``tool_span_shape``."""
    client = openai.OpenAI(base_url=run.base_url, api_key="unused", http_client=run.http_client())

    def tool_span(name: str, call_id: str, arguments: str) -> AbstractContextManager[Any]:
        span_name, attributes = tool_span_shape(name, call_id, arguments)
        return run.tracer.start_as_current_span(span_name, attributes=attributes)

    run.run_requests(lambda question: run_chat_loop(run, client, question, tool_span))


def run_chat_loop(run: DriverRun, client: openai.OpenAI, question: str, tool_span: ToolSpan) -> str:
    """Answer ``question`` with tools; returns the final text."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": question},
    ]
    for _ in range(MAX_LLM_CALLS):
        content, calls = _ask(run, client, messages)
        if not calls:
            return content
        messages.append({"role": "assistant", "content": content or None, "tool_calls": calls})
        for call in calls:
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            with tool_span(name, call["id"], arguments):
                result = run.tool_work(name, arguments)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    raise RuntimeError(f"no text answer after {MAX_LLM_CALLS} LLM calls")


def _ask(run: DriverRun, client: openai.OpenAI, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """One LLM call: the text and the tool calls (as message dicts) of the answer."""
    model = run.options.model
    if not run.options.stream:
        response = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)  # type: ignore[arg-type]
        message = response.choices[0].message
        calls = [call.model_dump(exclude_none=True) for call in message.tool_calls or ()]
        return message.content or "", calls
    stream = client.chat.completions.create(
        model=model,
        messages=messages,  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    text: list[str] = []
    calls_by_index: dict[int, dict[str, Any]] = {}
    for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            text.append(delta.content or "")
            for part in delta.tool_calls or ():
                call = calls_by_index.setdefault(
                    part.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                call["id"] = part.id or call["id"]
                if part.function is not None:
                    call["function"]["name"] += part.function.name or ""
                    call["function"]["arguments"] += part.function.arguments or ""
    return "".join(text), [calls_by_index[i] for i in sorted(calls_by_index)]
