"""The emulator's Anthropic Messages API (``/v1/messages``) as real Anthropic clients use it, through the
official ``anthropic`` SDK over loopback HTTP: tool use then text, streaming assembled by the SDK, cached prompt
tokens in Anthropic's meaning, token counting, errors."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from emulator_kit import ANSWER_TOKENS, MODEL, Serve, serve_emulator_app

from instrumented_stack.capture import InMemorySpans

SYSTEM = "You answer questions about the weather. " * 20
WEATHER: dict[str, Any] = {
    "name": "get_weather",
    "description": "Weather of a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "minLength": 2}, "days": {"type": "integer", "minimum": 1}},
        "required": ["city", "days"],
    },
}


def _client(in_memory_spans: InMemorySpans, serve: Serve) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=serve_emulator_app(in_memory_spans, serve), api_key="unused", max_retries=0)


def test_a_tool_is_used_then_the_answer_is_text(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    client = _client(in_memory_spans, serve)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    first = client.messages.create(model=MODEL, max_tokens=256, system=SYSTEM, tools=[WEATHER], messages=messages)
    assert first.stop_reason == "tool_use"
    (call,) = first.content
    assert call.type == "tool_use" and call.name == "get_weather"
    assert set(call.input) == {"city", "days"} and len(call.input["city"]) >= 2
    # The tool's answer comes back as a user turn of tool_result blocks: not a new question.
    messages += [
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]},
    ]
    second = client.messages.create(model=MODEL, max_tokens=256, system=SYSTEM, tools=[WEATHER], messages=messages)
    assert second.stop_reason == "end_turn"
    assert [block.type for block in second.content] == ["text"]
    assert second.usage.output_tokens == ANSWER_TOKENS
    # Anthropic's input_tokens excludes what the prefix cache served; the two add up to the prompt.
    assert second.usage.cache_read_input_tokens and second.usage.cache_read_input_tokens > 0
    engine = [span for span in in_memory_spans.spans("vllm") if span.name == "llm_request"]
    prompts = [span.attributes["gen_ai.usage.prompt_tokens"] for span in engine]
    assert len(prompts) == 2
    assert second.usage.input_tokens + second.usage.cache_read_input_tokens == prompts[1]
    counted = client.messages.count_tokens(model=MODEL, system=SYSTEM, tools=[WEATHER], messages=messages)
    assert counted.input_tokens == prompts[1]


def test_a_streamed_answer_is_assembled_by_the_sdk(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    client = _client(in_memory_spans, serve)
    with client.messages.stream(model=MODEL, max_tokens=256, messages=[{"role": "user", "content": "Hi"}]) as stream:
        kinds = [event.type for event in stream]
        message = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert kinds.count("content_block_start") == 1 and "text" in kinds
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == ANSWER_TOKENS
    assert message.content[0].type == "text" and message.content[0].text

    request: dict[str, Any] = {"model": MODEL, "max_tokens": 256, "system": SYSTEM, "tools": [WEATHER]}
    with client.messages.stream(**request, messages=[{"role": "user", "content": "Oslo?"}]) as stream:
        message = stream.get_final_message()
    assert message.stop_reason == "tool_use"
    # message_start already tells the cache reads (OpenLLMetry's instrumentation reads the input usage there).
    with client.messages.stream(**request, messages=[{"role": "user", "content": "Bergen?"}]) as stream:
        start = next(event for event in stream if event.type == "message_start")
        message = stream.get_final_message()
    assert start.message.usage.cache_read_input_tokens == message.usage.cache_read_input_tokens > 0
    assert start.message.usage.input_tokens == message.usage.input_tokens
    assert message.content[0].type == "tool_use" and set(message.content[0].input) == {"city", "days"}


def test_max_tokens_ends_the_answer_and_bad_requests_get_anthropic_sdk_errors(
    in_memory_spans: InMemorySpans, serve: Serve
) -> None:
    client = _client(in_memory_spans, serve)
    short = client.messages.create(model=MODEL, max_tokens=3, messages=[{"role": "user", "content": "Hi"}])
    assert short.stop_reason == "max_tokens" and short.usage.output_tokens == 3
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="other", max_tokens=3, messages=[{"role": "user", "content": "Hi"}])
    with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        client.post(
            "/v1/messages", body={"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}, cast_to=dict
        )
