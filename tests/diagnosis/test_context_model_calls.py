"""The context's model-call views: one row per call the request made, whatever instrumentation recorded it."""

from __future__ import annotations

from dataclasses import replace

import diagnosis_cases as cases
import polars as pl
from client_cases import Call, ClientRequest, build
from diagnosis_support import SpanSpec, frame, ms

from diagnosis import DiagnosisContext


def test_client_calls_with_their_attempts() -> None:
    spans = build(ClientRequest(0, [Call(ttft_ms=80.0, cached_tokens=512), Call(attempts=(429, 503, 200))]))
    ctx = DiagnosisContext(frame(spans))
    calls = ctx.model_calls
    assert calls["position"].to_list() == [0, 1]
    first = calls.row(0, named=True)
    assert (first["input_tokens"], first["output_tokens"], first["cached_input_tokens"]) == (600, 20, 512)
    assert first["ttft_ns"] == ms(80.0) and first["stream_ns"] == first["duration_ns"] - ms(80.0)
    assert first["model"] == "gpt-4o-mini" and first["provider"] == "openai" and not first["engine"]
    attempts = ctx.model_call_attempts
    assert attempts.group_by("call_index").len().sort("call_index")["len"].to_list() == [1, 3]
    assert attempts["http_status"].to_list() == [200, 429, 503, 200]


def test_a_framework_span_around_an_sdk_span_is_one_call_counted_once() -> None:
    (chat, *rest) = build(ClientRequest(0, [Call(ttft_ms=50.0)]))
    told = {k: v for k, v in chat.attributes.items() if k != "gen_ai.response.time_to_first_chunk"}
    outer = replace(
        chat,
        span_id="00000000000000f1",
        name="agent_llm_step",
        start=chat.start - ms(2),
        end=chat.end + ms(2),
        attributes=told,
    )
    inner = replace(chat, parent="00000000000000f1")
    ctx = DiagnosisContext(frame([outer, inner, *rest]))
    (call,) = ctx.model_calls.iter_rows(named=True)
    assert call["name"] == "agent_llm_step" and call["input_tokens"] == 600 and call["output_tokens"] == 20
    # Only the inner span tells the first token; the call starts 2 ms before it.
    assert call["ttft_ns"] == ms(52.0)
    assert ctx.model_call_attempts["call_index"].to_list() == [call["index"]]


def test_a_request_to_an_agent_service_is_not_a_model_call() -> None:
    # The stack's gateway calls the agent at /v1/invoke, a route a model API's rule also matches (Bedrock's
    # /invoke): it holds the agent's own chat calls below the agent's SERVER span, so those are the model calls.
    spans: list[SpanSpec] = cases.repeated_prompts(same=True)
    ctx = DiagnosisContext(frame(spans))
    calls = ctx.model_calls
    assert set(calls["name"]) == {"chat meta-llama/Llama-3.1-8B-Instruct"}
    assert calls.height == 20 and calls["engine"].all()
    assert calls.filter(pl.col("trace_id") == calls["trace_id"][0])["position"].to_list() == [0, 1]


def test_engine_spans_alone_are_calls_of_their_own() -> None:
    spans = [s for s in cases.queue_saturation(5.0) if s.name == "llm_request" or s.parent == ""]
    engine = [
        replace(s, parent=next(r.span_id for r in spans if r.trace_id == s.trace_id and r.parent == ""))
        if s.name == "llm_request"
        else s
        for s in spans
    ]
    calls = DiagnosisContext(frame(engine)).model_calls
    assert calls.height == 12 and calls["engine"].all() and (calls["input_tokens"] == 900).all()
    assert calls["ttft_ns"].is_not_null().all()
