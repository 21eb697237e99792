"""Server-sent events for ``stream: true``, in OpenAI's chunk format, paced by the engine's own steps.

vLLM's OpenAI server sends the response headers at once, then one ``data: {chunk}`` event per engine output:
the first (with ``delta.role``) when the first token is sampled, the rest as decode proceeds, a last chunk with
``finish_reason``, with ``stream_options.include_usage`` a chunk with ``usage`` and empty ``choices``, and
``data: [DONE]``. Here each chunk goes out at the end of the engine step that sampled its tokens
(:class:`TokenStream`), so a client's first-chunk time is the emulated first token.

Chunk shapes (OpenAI API reference, "The chat completion chunk object"; legacy completions stream the
``text_completion`` object): ``{"id", "object", "created", "model", "choices": [{"index", "delta" | "text",
"logprobs", "finish_reason"}], "usage"}``. Tool calls stream as ``delta.tool_calls`` entries: the first with
``index``, ``id``, ``type`` and ``function.name``, later ones with ``function.arguments`` pieces.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from instrumented_stack.engine.core import EngineResult, TokenListener
from instrumented_stack.engine.openai_protocol import ToolCall, UsageInfo

DONE_EVENT = b"data: [DONE]\n\n"
EVENT_STREAM = "text/event-stream"


def sse_event(payload: dict[str, Any]) -> bytes:
    """One server-sent event carrying ``payload`` as compact JSON."""
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


class TokenStream:
    """Runs one engine request and yields its output-token count after every step that sampled one.

    Args:
        run: starts the request with a :data:`TokenListener` and returns its result.

    Iterate :meth:`counts` to the end, then read :attr:`result`. Leaving the iteration early (the client went
    away) cancels the request, which aborts it in the engine. :attr:`cached_tokens` holds the prompt tokens the
    prefix cache served, as the engine told with the last count yielded.
    """

    def __init__(self, run: Callable[[TokenListener], Awaitable[EngineResult]]) -> None:
        self._run = run
        self._result: EngineResult | None = None
        self.cached_tokens = 0

    async def counts(self) -> AsyncIterator[int]:
        """Output tokens so far, once per step that sampled one; raises what the request raised."""
        queue: asyncio.Queue[tuple[int, int] | None] = asyncio.Queue()
        task = asyncio.ensure_future(self._run(lambda count, cached: queue.put_nowait((count, cached))))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (progress := await queue.get()) is not None:
                count, self.cached_tokens = progress
                yield count
            self._result = task.result()
        finally:
            task.cancel()

    @property
    def result(self) -> EngineResult:
        """The finished request's result. Raises ``RuntimeError`` before :meth:`counts` has ended."""
        if self._result is None:
            raise RuntimeError("the token stream has not finished")
        return self._result


@dataclass(frozen=True, slots=True)
class StreamHead:
    """What every chunk of one response repeats: ``id``, ``object``, ``created`` (Unix s) and ``model``."""

    id: str
    object: str
    created: int
    model: str

    def chunk(self, choices: list[dict[str, Any]], usage: UsageInfo | None = None) -> bytes:
        """One event with ``choices`` (and ``usage`` when given)."""
        payload: dict[str, Any] = {
            "id": self.id,
            "object": self.object,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if usage is not None:
            payload["usage"] = usage.model_dump(exclude_none=True)
        return sse_event(payload)


def piece(text: str, before: int, after: int, total: int) -> str:
    """The part of ``text`` produced by tokens ``before`` (exclusive) to ``after`` (inclusive) of ``total``.

    The text is cut in proportion to tokens (character positions ``len * n // total``), so the pieces
    concatenate to ``text`` once ``after == total``.
    """
    total = max(total, 1)
    return text[len(text) * min(before, total) // total : len(text) * min(after, total) // total]


async def chat_events(
    head: StreamHead,
    tokens: TokenStream,
    *,
    content: str | None,
    tool_call: ToolCall | None,
    total_tokens: int,
    usage: Callable[[EngineResult], UsageInfo],
    include_usage: bool,
) -> AsyncIterator[bytes]:
    """The chat completion chunks of one answer: ``content`` text, or one ``tool_call`` streamed by arguments.

    Args:
        head: the response's id, object (``chat.completion.chunk``), created and model.
        tokens: the running request.
        content: the answer text (``None`` when the answer is ``tool_call``).
        tool_call: the answer's one tool call, or ``None``.
        total_tokens: the tokens the answer takes (its pieces are cut in proportion).
        usage: the usage of the finished request.
        include_usage: end with a ``usage`` chunk (``stream_options.include_usage``).
    """
    sent = 0
    async for count in tokens.counts():
        if sent == 0:
            first: dict[str, Any] = {"role": "assistant", "content": "" if tool_call is None else None}
            if tool_call is not None:
                header = {"name": tool_call.function.name, "arguments": ""}
                first["tool_calls"] = [{"index": 0, "id": tool_call.id, "type": "function", "function": header}]
            yield head.chunk([_choice(first)])
        if tool_call is None:
            delta: dict[str, Any] = {"content": piece(content or "", sent, count, total_tokens)}
        else:
            arguments = piece(tool_call.function.arguments, sent, count, total_tokens)
            delta = {"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}
        yield head.chunk([_choice(delta)])
        sent = count
    result = tokens.result
    finish = "tool_calls" if tool_call is not None else result.finish_reason
    yield head.chunk([_choice({}, finish)])
    if include_usage:
        yield head.chunk([], usage(result))
    yield DONE_EVENT


async def completion_events(
    head: StreamHead,
    tokens: TokenStream,
    *,
    text: str,
    total_tokens: int,
    usage: Callable[[EngineResult], UsageInfo],
    include_usage: bool,
) -> AsyncIterator[bytes]:
    """The ``text_completion`` chunks of one answer (arguments as :func:`chat_events`)."""
    sent = 0
    async for count in tokens.counts():
        yield head.chunk([_text_choice(piece(text, sent, count, total_tokens))])
        sent = count
    result = tokens.result
    yield head.chunk([_text_choice("", result.finish_reason)])
    if include_usage:
        yield head.chunk([], usage(result))
    yield DONE_EVENT


def _choice(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}


def _text_choice(text: str, finish_reason: str | None = None) -> dict[str, Any]:
    return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
