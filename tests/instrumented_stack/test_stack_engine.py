"""The vLLM emulator on its own: OpenAI-compatible routes, errors, span parentage and queueing."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import httpx
from fastapi import FastAPI
from opentelemetry.trace import SpanKind

from instrumented_stack.capture import InMemorySpans
from instrumented_stack.engine import EngineConfig, SimpleTimeModel, create_engine_app
from instrumented_stack.engine.vllm_span import trace_headers

MODEL = "test-model"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN_ID = "00f067aa0ba902b7"

Serve = Callable[[FastAPI], str]


def _engine(in_memory_spans: InMemorySpans, serve: Serve, **config: Any) -> str:
    app = create_engine_app(EngineConfig(served_model_name=MODEL, max_model_len=256, **config), in_memory_spans("vllm"))
    return serve(app)


def test_health(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    url = _engine(in_memory_spans, serve)
    response = httpx.get(f"{url}/health")
    assert response.status_code == 200
    assert in_memory_spans.spans() == []


def test_completion_with_token_ids_is_a_root_llm_request_without_traceparent(
    in_memory_spans: InMemorySpans, serve: Serve
) -> None:
    url = _engine(in_memory_spans, serve, time_model=SimpleTimeModel(speed=100))
    body = {"model": MODEL, "prompt": list(range(40)), "max_tokens": 7, "temperature": 0.5, "top_p": 0.9}
    response = httpx.post(f"{url}/v1/completions", json=body, headers={"x-request-id": "abc"})
    assert response.status_code == 200, response.text
    payload = response.json()
    assert payload["id"] == "cmpl-abc"
    assert payload["object"] == "text_completion"
    assert payload["usage"] == {"prompt_tokens": 40, "completion_tokens": 7, "total_tokens": 47}
    assert payload["choices"][0]["finish_reason"] == "length"
    assert len(payload["choices"][0]["text"].split()) == 7
    (span,) = in_memory_spans.spans("vllm")
    assert span.name == "llm_request" and span.kind == SpanKind.SERVER
    assert span.parent is None
    assert span.instrumentation_scope.name == "vllm.llm_engine"
    assert span.attributes["gen_ai.request.id"] == "cmpl-abc-0"
    assert span.attributes["gen_ai.request.temperature"] == 0.5
    assert span.attributes["gen_ai.request.top_p"] == 0.9


def test_chat_span_is_child_of_traceparent_and_ignores_baggage(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    url = _engine(in_memory_spans, serve, time_model=SimpleTimeModel(speed=100))
    headers = {
        "traceparent": f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01",
        "tracestate": "vendor=1",
        "baggage": "tenant_id=acme,sample_policy=debug-high",
    }
    body = {"model": MODEL, "messages": [{"role": "user", "content": "one two three"}], "max_tokens": 2}
    response = httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["prompt_tokens"] == 3
    assert response.json()["id"].startswith("chatcmpl-")
    (span,) = in_memory_spans.spans("vllm")
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert format(span.parent.span_id, "016x") == PARENT_SPAN_ID
    assert span.parent.is_remote
    assert not any(key in span.attributes for key in ("tenant_id", "sample_policy"))
    assert trace_headers(httpx.Headers(headers)) == {k: headers[k] for k in ("traceparent", "tracestate")}


def test_falsy_sampling_parameters_are_left_out_as_vllm_does(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    url = _engine(in_memory_spans, serve, time_model=SimpleTimeModel(speed=100))
    body = {"model": MODEL, "prompt": "a b c", "max_tokens": 1, "temperature": 0}
    assert httpx.post(f"{url}/v1/completions", json=body).status_code == 200
    (span,) = in_memory_spans.spans("vllm")
    assert "gen_ai.request.temperature" not in span.attributes
    assert span.attributes["gen_ai.latency.time_in_model_decode"] < 1e-3, "one token: nothing to decode"


def test_refused_requests_answer_vllm_style_errors_and_record_no_span(
    in_memory_spans: InMemorySpans, serve: Serve
) -> None:
    url = _engine(in_memory_spans, serve)
    cases = [
        ({"model": "other", "prompt": "a"}, 404, "model"),
        ({"model": MODEL, "prompt": "a", "stream": True}, 400, "stream"),
        ({"model": MODEL, "prompt": "a", "n": 2}, 400, "n"),
        ({"model": MODEL, "prompt": "   "}, 400, "prompt"),
        ({"model": MODEL, "prompt": "a", "max_tokens": 256}, 400, "max_tokens"),
        ({"model": MODEL, "prompt": "a", "max_tokens": 0}, 400, "max_tokens"),
    ]
    for body, status, param in cases:
        response = httpx.post(f"{url}/v1/completions", json=body)
        assert response.status_code == status, body
        error = response.json()["error"]
        assert error["code"] == status and error["param"] == param and error["message"], body
    assert in_memory_spans.spans() == []


def test_requests_beyond_max_num_seqs_wait_in_the_queue(in_memory_spans: InMemorySpans, serve: Serve) -> None:
    # One running slot; each request decodes for 20 tokens * 2 ms = ~38 ms.
    time_model = SimpleTimeModel(prefill_s_per_token=0, decode_s_per_token=0.002)
    url = _engine(in_memory_spans, serve, max_num_seqs=1, time_model=time_model)
    body = {"model": MODEL, "prompt": "a b", "max_tokens": 20}

    async def send_three() -> None:
        async with httpx.AsyncClient(base_url=url) as http:
            responses = await asyncio.gather(*(http.post("/v1/completions", json=body) for _ in range(3)))
        assert [r.status_code for r in responses] == [200, 200, 200]

    asyncio.run(send_three())
    spans = in_memory_spans.spans("vllm")
    # [scheduled, finished] in Unix seconds; one slot means these never overlap.
    running = sorted(
        (span.start_time / 1e9 + span.attributes["gen_ai.latency.time_in_queue"], span.end_time / 1e9) for span in spans
    )
    for (_, previous_end), (scheduled, _) in itertools.pairwise(running):
        assert scheduled >= previous_end - 1e-4
    decode_s = 19 * 0.002
    assert max(span.attributes["gen_ai.latency.time_in_queue"] for span in spans) >= decode_s
