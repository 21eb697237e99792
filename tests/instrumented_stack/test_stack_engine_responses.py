"""The emulator's Responses API (``/v1/responses``) as real clients use it, through the official ``openai`` SDK over
loopback HTTP: a function call then a message, the stream assembled by the SDK, cached prompt tokens, errors."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from emulator_kit import ANSWER_TOKENS, MODEL, Serve, serve_emulator_app

from instrumented_stack.capture import InMemorySpans

INSTRUCTIONS = "You answer questions about the weather. " * 20
WEATHER: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "minLength": 2}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


def _client(in_memory_spans: InMemorySpans, serve: Serve) -> openai.OpenAI:
    url = serve_emulator_app(in_memory_spans, serve)
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def test_a_function_is_called_then_the_answer_is_a_message(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    client = _client(in_memory_spans, serve)
    items: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    first = client.responses.create(model=MODEL, instructions=INSTRUCTIONS, tools=[WEATHER], input=items)
    (call,) = first.output
    assert call.type == "function_call" and call.name == "get_weather" and call.status == "completed"
    items += [
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "sun"},
    ]
    second = client.responses.create(model=MODEL, instructions=INSTRUCTIONS, tools=[WEATHER], input=items)
    assert [item.type for item in second.output] == ["message"]
    assert second.output_text
    assert second.usage is not None and second.usage.output_tokens == ANSWER_TOKENS
    engine = [span for span in in_memory_spans.spans("vllm") if span.name == "llm_request"]
    assert second.usage.input_tokens == engine[1].attributes["gen_ai.usage.prompt_tokens"]
    assert second.usage.input_tokens_details.cached_tokens > 0


def test_a_streamed_response_is_assembled_by_the_sdk(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    client = _client(in_memory_spans, serve)
    with client.responses.stream(model=MODEL, input="Hi") as stream:
        kinds = [event.type for event in stream]
        response = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert response.output_text and response.usage is not None
    assert response.usage.output_tokens == ANSWER_TOKENS

    with client.responses.stream(model=MODEL, tools=[WEATHER], input="Oslo?") as stream:
        kinds = [event.type for event in stream]
        response = stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    (call,) = response.output
    assert call.type == "function_call" and call.arguments.startswith("{")


def test_an_unknown_model_is_refused(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    client = _client(in_memory_spans, serve)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="other", input="Hi")
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input="Hi", max_output_tokens=10_000)
