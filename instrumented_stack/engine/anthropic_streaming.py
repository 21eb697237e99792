"""Server-sent events of a streamed Messages answer, paced by the engine's own steps.

Anthropic's stream ("Streaming Messages" in its API reference) is a sequence of named events, each ``event: <type>``
then ``data: {"type": <type>, ...}``: ``message_start`` (the message with empty ``content`` and the input usage),
``content_block_start``, one ``content_block_delta`` per piece (``text_delta`` for text, ``input_json_delta`` with
``partial_json`` for a ``tool_use`` block's input), ``content_block_stop``, ``message_delta`` (``stop_reason`` and
the output usage) and ``message_stop``. ``message_start`` carries the input usage, cache reads included (clients
such as OpenLLMetry's read it there), and ``message_delta`` the whole usage again. Here the first three go out when
the engine samples the first token, each later delta at the end of the step that sampled its tokens, so a client's
first-delta time is the emulated first token, as :mod:`streaming` does for OpenAI's chunks.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from instrumented_stack.engine.anthropic_protocol import STOP_REASONS, ContentBlock, MessagesUsage
from instrumented_stack.engine.core import EngineResult
from instrumented_stack.engine.streaming import TokenStream, piece


def named_event(kind: str, payload: dict[str, Any]) -> bytes:
    """One server-sent event ``kind`` whose data is ``{"type": kind, **payload}`` as compact JSON."""
    data = json.dumps({"type": kind, **payload}, separators=(",", ":"))
    return f"event: {kind}\ndata: {data}\n\n".encode()


async def message_events(
    message: dict[str, Any],
    tokens: TokenStream,
    *,
    block: ContentBlock,
    total_tokens: int,
    usage: Callable[[EngineResult], MessagesUsage],
    opening: Callable[[int], MessagesUsage],
) -> AsyncIterator[bytes]:
    """The events of one answer made of one content ``block``.

    Args:
        message: the message's ``id`` and ``model``.
        tokens: the running request.
        block: the whole answer: ``{"type": "text", "text"}`` or ``{"type": "tool_use", "id", "name", "input"}``;
            text streams in pieces cut in proportion to tokens, a tool's input as its JSON text in pieces.
        total_tokens: the tokens the answer takes.
        usage: the usage of the finished request (``message_delta``).
        opening: the input usage at the first token, from the prompt tokens the cache served (``message_start``).
    """
    tool_use = block["type"] == "tool_use"
    whole = json.dumps(block["input"], separators=(",", ":")) if tool_use else block["text"]
    sent = 0
    async for count in tokens.counts():
        if sent == 0:
            start = {**message, "type": "message", "role": "assistant", "content": []}
            start["usage"] = opening(tokens.cached_tokens).model_dump()
            yield named_event("message_start", {"message": start | {"stop_reason": None, "stop_sequence": None}})
            empty = {**block, "input": {}} if tool_use else {"type": "text", "text": ""}
            yield named_event("content_block_start", {"index": 0, "content_block": empty})
        text = piece(whole, sent, count, total_tokens)
        delta = {"type": "input_json_delta", "partial_json": text} if tool_use else {"type": "text_delta", "text": text}
        yield named_event("content_block_delta", {"index": 0, "delta": delta})
        sent = count
    result = tokens.result
    yield named_event("content_block_stop", {"index": 0})
    stop_reason = "tool_use" if tool_use else STOP_REASONS.get(result.finish_reason, "end_turn")
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    yield named_event("message_delta", {"delta": delta, "usage": usage(result).model_dump()})
    yield named_event("message_stop", {})
