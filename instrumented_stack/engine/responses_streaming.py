"""Server-sent events of a streamed Responses API answer, paced by the engine's own steps.

OpenAI's Responses stream ("Streaming events" in its API reference) is a sequence of named events, each
``event: <type>`` then ``data: {"type": <type>, "sequence_number": n, ...}``. Here: ``response.created`` and
``response.in_progress`` at once (the request was accepted); at the first token ``response.output_item.added``
(and, for a message, ``response.content_part.added``); one ``response.output_text.delta`` (a message) or
``response.function_call_arguments.delta`` (a function call) per engine step that sampled tokens; then the
matching ``.done`` events, ``response.output_item.done`` and ``response.completed`` with the usage. A client's
first-delta time is the emulated first token, as :mod:`streaming` does for chat chunks.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from instrumented_stack.engine.core import EngineResult
from instrumented_stack.engine.responses_protocol import Item, response_object
from instrumented_stack.engine.streaming import TokenStream, piece


async def response_events(
    head: dict[str, Any],
    tokens: TokenStream,
    *,
    item: Item,
    total_tokens: int,
    usage: Callable[[EngineResult], dict[str, Any]],
) -> AsyncIterator[bytes]:
    """The events of one answer made of one output ``item``.

    Args:
        head: the response's ``id``, ``created_at`` (Unix s) and ``model``.
        tokens: the running request.
        item: the whole answer: ``{"type": "message", "id", "role", "content": [{"type": "output_text", "text"}]}``
            or ``{"type": "function_call", "id", "call_id", "name", "arguments"}``; its text or arguments stream in
            pieces cut in proportion to tokens.
        total_tokens: the tokens the answer takes.
        usage: the usage of the finished request.
    """
    numbers = itertools.count()

    def event(kind: str, **payload: Any) -> bytes:
        data = json.dumps({"type": kind, "sequence_number": next(numbers), **payload}, separators=(",", ":"))
        return f"event: {kind}\ndata: {data}\n\n".encode()

    call = item["type"] == "function_call"
    whole = item["arguments"] if call else item["content"][0]["text"]
    where = {"item_id": item["id"], "output_index": 0}
    part = {"type": "output_text", "text": "", "annotations": []}
    yield event("response.created", response=response_object(head, [], "in_progress", None))
    yield event("response.in_progress", response=response_object(head, [], "in_progress", None))
    sent = 0
    async for count in tokens.counts():
        if sent == 0:
            empty = {**item, "arguments": ""} if call else {**item, "content": []}
            yield event("response.output_item.added", output_index=0, item=empty | {"status": "in_progress"})
            if not call:
                yield event("response.content_part.added", **where, content_index=0, part=part)
        delta = piece(whole, sent, count, total_tokens)
        if call:
            yield event("response.function_call_arguments.delta", **where, delta=delta)
        else:
            yield event("response.output_text.delta", **where, content_index=0, delta=delta, logprobs=[])
        sent = count
    result = tokens.result
    if call:
        yield event("response.function_call_arguments.done", **where, arguments=whole)
    else:
        yield event("response.output_text.done", **where, content_index=0, text=whole, logprobs=[])
        yield event("response.content_part.done", **where, content_index=0, part={**part, "text": whole})
    done = {**item, "status": "completed"}
    yield event("response.output_item.done", output_index=0, item=done)
    yield event("response.completed", response=response_object(head, [done], "completed", usage(result)))
