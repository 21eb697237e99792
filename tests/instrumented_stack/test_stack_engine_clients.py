"""The emulator as real OpenAI clients use it, through the official ``openai`` SDK over loopback HTTP:
streaming paced by the engine's steps, tool calls, cached prompt tokens, engine tracing off, throttling."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx2
import jsonschema
import openai
import pytest
from emulator_kit import ANSWER_TOKENS, MODEL, Serve, serve_emulator_app

from instrumented_stack.capture import InMemorySpans
from instrumented_stack.engine import StepTimeModel
from instrumented_stack.engine.throttle import ThrottleConfig
from instrumented_stack.tokenizer import default_tokenizer

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 2},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "note": {"type": "string"},
            },
            "required": ["city", "days", "unit"],
            "additionalProperties": False,
        },
    },
}
CLOCK_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {"name": "now", "parameters": {"type": "object", "properties": {}}},
}


def _client(
    in_memory_spans: InMemorySpans, serve: Serve, *, max_retries: int = 0, **config: Any
) -> tuple[openai.OpenAI, list[int]]:
    """An SDK client on a fresh emulator, and the HTTP status of every attempt it makes (event hook)."""
    url = serve_emulator_app(in_memory_spans, serve, **config)
    statuses: list[int] = []
    http_client = httpx2.Client(event_hooks={"response": [lambda response: statuses.append(response.status_code)]})
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=max_retries, http_client=http_client)
    return client, statuses


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def test_streamed_chat_sends_the_first_chunk_at_the_emulated_first_token_and_the_rest_during_decode(
    in_memory_spans: InMemorySpans, serve: Serve
) -> None:
    """speed 1: each decode step is >= 6 ms, so 12 tokens take >= 66 ms after the first one."""
    client, _ = _client(in_memory_spans, serve, time_model=StepTimeModel(speed=1))
    arrivals: list[tuple[int, Any]] = []
    stream = client.chat.completions.create(
        model=MODEL,
        messages=_user("How long does a refund take ?"),
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        arrivals.append((time.time_ns(), chunk))
    (span,) = in_memory_spans.spans("vllm")
    assert span.start_time is not None and span.end_time is not None
    first_token_ns = span.start_time + round(span.attributes["gen_ai.latency.time_to_first_token"] * 1e9)
    content = [(at, chunk) for at, chunk in arrivals if chunk.choices and chunk.choices[0].delta.content]
    assert arrivals[0][1].choices[0].delta.role == "assistant"
    first_at = content[0][0]
    # Not before the engine sampled the first token, and well before the last one (not all sent at the end).
    assert first_at >= first_token_ns
    assert first_at < span.end_time - (span.end_time - first_token_ns) // 2
    assert [at for at, _ in arrivals] == sorted(at for at, _ in arrivals)
    text = "".join(chunk.choices[0].delta.content for _, chunk in content)
    assert default_tokenizer().count(text) == ANSWER_TOKENS
    finish = [chunk.choices[0].finish_reason for _, chunk in arrivals if chunk.choices]
    assert finish[-1] == "stop" and set(finish[:-1]) == {None}
    usage = arrivals[-1][1].usage
    assert arrivals[-1][1].choices == []
    assert usage.completion_tokens == ANSWER_TOKENS == span.attributes["gen_ai.usage.completion_tokens"]
    assert usage.prompt_tokens == span.attributes["gen_ai.usage.prompt_tokens"]


def test_streamed_completion_yields_chunks_and_usage(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    client, _ = _client(in_memory_spans, serve, time_model=StepTimeModel(speed=50))
    chunks = list(
        client.completions.create(
            model=MODEL, prompt="Once upon a time", max_tokens=5, stream=True, stream_options={"include_usage": True}
        )
    )
    texts = [chunk.choices[0].text for chunk in chunks if chunk.choices]
    assert len([text for text in texts if text]) == 5
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5


def test_tool_calls_each_offered_tool_once_then_answers_with_text(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    client, _ = _client(in_memory_spans, serve, time_model=StepTimeModel(speed=50))
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}, *_user("Weather in Oslo?")]
    called: list[str] = []
    for _ in range(3):
        response = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER_TOOL, CLOCK_TOOL])
        choice = response.choices[0]
        if choice.finish_reason != "tool_calls":
            break
        (call,) = choice.message.tool_calls or []
        assert choice.message.content is None and call.type == "function"
        tool = next(t for t in (WEATHER_TOOL, CLOCK_TOOL) if t["function"]["name"] == call.function.name)
        jsonschema.validate(json.loads(call.function.arguments), tool["function"]["parameters"])
        called.append(call.function.name)
        messages += [
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "ok"},
        ]
    assert called == ["get_weather", "now"]
    assert choice.finish_reason == "stop" and choice.message.content
    assert response.usage is not None and response.usage.completion_tokens == ANSWER_TOKENS
    # A new user message starts a new turn: the first tool again.
    messages += [{"role": "assistant", "content": choice.message.content}, *_user("And tomorrow?")]
    again = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER_TOOL, CLOCK_TOOL])
    assert again.choices[0].message.tool_calls[0].function.name == "get_weather"
    forced = client.chat.completions.create(
        model=MODEL, messages=_user("time?"), tools=[WEATHER_TOOL, CLOCK_TOOL], tool_choice="none"
    )
    assert forced.choices[0].finish_reason == "stop"


def test_streamed_tool_call_is_assembled_by_the_sdk(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    client, _ = _client(in_memory_spans, serve, time_model=StepTimeModel(speed=20))
    with client.chat.completions.stream(model=MODEL, messages=_user("Weather?"), tools=[WEATHER_TOOL]) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather" and call.id.startswith("chatcmpl-tool-")
    assert json.loads(call.function.arguments) == {"city": "example", "days": 1, "unit": "celsius"}


def test_a_repeated_prompt_prefix_reports_cached_tokens(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    client, _ = _client(in_memory_spans, serve, time_model=StepTimeModel(speed=50))
    history = " ".join(default_tokenizer().synthesize(300).split())
    first = client.chat.completions.create(model=MODEL, messages=_user(history + " first question"))
    second = client.chat.completions.create(model=MODEL, messages=_user(history + " second question"))
    assert first.usage is not None and second.usage is not None
    assert first.usage.prompt_tokens_details is not None and second.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert 0 < cached < second.usage.prompt_tokens and cached % 16 == 0
    # vLLM v1's llm_request span keeps its attribute set: no cached-token attribute.
    assert all("gen_ai.usage.cached_tokens" not in span.attributes for span in in_memory_spans.spans("vllm"))


def test_engine_tracing_off_records_no_span(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    client, _ = _client(in_memory_spans, serve, time_model=StepTimeModel(speed=50), trace_requests=False)
    response = client.chat.completions.create(model=MODEL, messages=_user("hello"))
    assert response.choices[0].message.content
    assert in_memory_spans.spans() == []


@pytest.mark.parametrize(("status", "error"), [(429, openai.RateLimitError), (503, openai.InternalServerError)])
def test_throttled_requests_answer_with_retry_after_and_an_openai_error_body(
    in_memory_spans: InMemorySpans, serve: Serve, status: int, error: type[Exception]
) -> None:
    throttle = ThrottleConfig(fraction=1.0, status=status, retry_after_s=0.25)
    client, statuses = _client(in_memory_spans, serve, throttle=throttle)
    with pytest.raises(error) as raised:
        client.chat.completions.create(model=MODEL, messages=_user("hello"))
    response = raised.value.response  # type: ignore[attr-defined]
    assert response.headers["retry-after"] == "1" and response.headers["retry-after-ms"] == "250"
    assert response.json()["error"]["code"] == status
    assert statuses == [status]
    assert in_memory_spans.spans() == []


def test_throttling_is_seeded_and_the_sdk_retries_through_it(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    throttle = ThrottleConfig(fraction=0.5, seed=7, retry_after_s=0.001)
    runs: list[list[int]] = []
    for _ in range(2):
        client, statuses = _client(
            in_memory_spans, serve, max_retries=10, throttle=throttle, time_model=StepTimeModel(speed=100)
        )
        for _ in range(4):
            assert client.chat.completions.create(model=MODEL, messages=_user("hello")).choices[0].message.content
        runs.append(statuses)
    assert runs[0] == runs[1]
    assert runs[0].count(200) == 4 and runs[0].count(429) >= 1
    # Only requests that reached the engine have an llm_request span (the last engine's four).
    assert len(in_memory_spans.spans("vllm")) == 4
