"""A hand-written agent loop over the OpenAI Python SDK, the way applications without a framework write one.

The model is offered the two tools; while it answers with ``tool_calls``, the app runs each tool (inside a
tool span of the instrumentation's convention, which the caller opens: the SDK instrumentations trace the
LLM calls only) and sends the results back; it stops at the first text answer. Against the emulator that is
three LLM calls per request (``engine.tool_calls``). Streaming reads the chunks and assembles the tool
calls as the SDK's delta format gives them.

``DriverOptions.app`` (:class:`~instrumented_stack.realclients.common.AppSettings`) changes the app the way the
client-side faults need: side questions asked before the loop (one after another or at once), the whole
conversation re-sent on every call, a clock at the top of the system prompt, a longer system prompt, every
tool call run twice; and requests that are turns of one conversation, each sent after the earlier turns.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any

import openai

from instrumented_stack.realclients.common import (
    SIDE_QUESTIONS,
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
    """Answer ``question`` with tools, as ``run.options.app`` says; returns the final text."""
    app = run.options.app
    notes = _side_answers(run, client, question)
    user = f"{question}\nNotes: {' / '.join(notes)}" if notes else question
    # A turn of a conversation sends the earlier turns first, so its context grows turn by turn.
    earlier = run.history if app.conversation else []
    messages: list[dict[str, Any]] = [{"role": "system", "content": ""}, *earlier, {"role": "user", "content": user}]
    transcript: list[dict[str, Any]] = []
    for _ in range(MAX_LLM_CALLS):
        messages[0] = {"role": "system", "content": app.system_prompt()}
        if app.resend_history:
            transcript += messages
        content, calls = _ask(run, client, transcript if app.resend_history else messages, TOOLS)
        if not calls:
            if app.conversation:
                run.history += [{"role": "user", "content": user}, {"role": "assistant", "content": content}]
            return content
        messages.append({"role": "assistant", "content": content or None, "tool_calls": calls})
        for call in calls:
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            for _run in range(2 if app.repeat_tool_calls else 1):
                with tool_span(name, call["id"], arguments):
                    result = run.tool_work(name, arguments)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    raise RuntimeError(f"no text answer after {MAX_LLM_CALLS} LLM calls")


def _side_answers(run: DriverRun, client: openai.OpenAI, question: str) -> list[str]:
    """The answers to the app's side questions about ``question`` (none by default), asked one after another
    or at once; each runs in a copy of the caller's context, so its LLM span joins the request's trace."""
    app = run.options.app

    def ask(side: str) -> str:
        messages = [
            {"role": "system", "content": app.system_prompt()},
            {"role": "user", "content": f"{side} {question}"},
        ]
        return _ask(run, client, messages, None)[0]

    questions = SIDE_QUESTIONS[: app.side_questions]
    if not app.side_questions_concurrent:
        return [ask(side) for side in questions]
    with ThreadPoolExecutor(max_workers=max(len(questions), 1)) as pool:
        futures = [pool.submit(contextvars.copy_context().run, ask, side) for side in questions]
        return [future.result() for future in futures]


def _ask(
    run: DriverRun, client: openai.OpenAI, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> tuple[str, list[dict[str, Any]]]:
    """One LLM call (``tools`` offered, or none): the text and the tool calls (as message dicts) of the answer."""
    request: dict[str, Any] = {"model": run.options.model, "messages": messages}
    if tools is not None:
        request["tools"] = tools
    if not run.options.stream:
        response = client.chat.completions.create(**request)
        message = response.choices[0].message
        calls = [call.model_dump(exclude_none=True) for call in message.tool_calls or ()]
        return message.content or "", calls
    stream = client.chat.completions.create(**request, stream=True, stream_options={"include_usage": True})
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
