"""vLLM's ``llm_request`` span as the emulator records it inside the stack."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, format_trace_id

from instrumented_stack.capture import InMemorySpans
from instrumented_stack.engine import StepTimeModel
from instrumented_stack.engine.vllm_span import LLM_REQUEST_ATTRIBUTES
from instrumented_stack.runner import RunSummary
from instrumented_stack.semconv import GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS

LATENCY_ATTRIBUTES = (
    "gen_ai.latency.time_in_queue",
    "gen_ai.latency.time_to_first_token",
    "gen_ai.latency.e2e",
    "gen_ai.latency.time_in_model_prefill",
    "gen_ai.latency.time_in_model_decode",
    "gen_ai.latency.time_in_model_inference",
)
OTHER_ATTRIBUTES = (
    "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.completion_tokens",
    "gen_ai.request.id",
    "gen_ai.request.max_tokens",
    "gen_ai.request.temperature",
    "gen_ai.request.top_p",
    "gen_ai.request.n",
    "gen_ai.response.finish_reasons",
)
ROUNDING_S = 1e-6
"""Float subtraction of monotonic seconds; the emulator adds no other rounding."""


def _engine_spans_by_trace(stack_run: RunSummary, stack_spans: InMemorySpans) -> dict[str, ReadableSpan]:
    """The ``llm_request`` span of each successful user request, keyed by trace id."""
    spans = stack_spans.spans("vllm")
    assert len(spans) == stack_run.requests
    assert all(span.name == "llm_request" and span.kind == SpanKind.SERVER for span in spans)
    return {format_trace_id(span.context.trace_id): span for span in spans}


def _cached_prompt_tokens(stack_spans: InMemorySpans) -> dict[str, int]:
    """Prompt tokens the engine's prefix cache served, per trace id, as the calling service recorded them
    (``gen_ai.usage.cache_read.input_tokens``: vLLM's ``llm_request`` span does not carry them)."""
    return {
        trace_id: max((span.attributes or {}).get(GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, 0) for span in spans)
        for trace_id, spans in stack_spans.traces().items()
    }


def test_attribute_set_is_vllm_v1s(stack_run: RunSummary, stack_spans: InMemorySpans) -> None:
    for span in _engine_spans_by_trace(stack_run, stack_spans).values():
        assert set(span.attributes) == set(LATENCY_ATTRIBUTES) | set(OTHER_ATTRIBUTES) == LLM_REQUEST_ATTRIBUTES
        for name in LATENCY_ATTRIBUTES:
            assert isinstance(span.attributes[name], float), name
        assert json.loads(span.attributes["gen_ai.response.finish_reasons"]) == ["length"]
        assert span.attributes["gen_ai.request.n"] == 1
        assert span.attributes["gen_ai.request.id"].startswith("chatcmpl-")


def test_output_token_counts_equal_the_workload_rows(stack_run: RunSummary, stack_spans: InMemorySpans) -> None:
    spans = _engine_spans_by_trace(stack_run, stack_spans)
    for outcome in stack_run.outcomes:
        span = spans[outcome.trace_id]
        assert span.attributes["gen_ai.usage.completion_tokens"] == outcome.workload.output_tokens
        assert span.attributes["gen_ai.request.max_tokens"] == outcome.workload.output_tokens


def test_latency_parts_add_up(stack_run: RunSummary, stack_spans: InMemorySpans) -> None:
    for span in _engine_spans_by_trace(stack_run, stack_spans).values():
        a = span.attributes
        queue, prefill, decode = (
            a[f"gen_ai.latency.{part}"] for part in ("time_in_queue", "time_in_model_prefill", "time_in_model_decode")
        )
        assert min(queue, prefill, decode) >= 0
        assert queue + prefill + decode == pytest.approx(a["gen_ai.latency.e2e"], abs=ROUNDING_S)
        assert prefill + decode == pytest.approx(a["gen_ai.latency.time_in_model_inference"], abs=ROUNDING_S)
        assert queue + prefill == pytest.approx(a["gen_ai.latency.time_to_first_token"], abs=ROUNDING_S)


def test_latencies_are_seconds(stack_run: RunSummary, stack_spans: InMemorySpans, stack_speed: float) -> None:
    spans = _engine_spans_by_trace(stack_run, stack_spans)
    cached = _cached_prompt_tokens(stack_spans)
    speed = stack_speed
    for outcome in stack_run.outcomes:
        span = spans[outcome.trace_id]
        e2e_s = span.attributes["gen_ai.latency.e2e"]
        # The span lasts exactly e2e: start = arrival, end = finish.
        assert (span.end_time - span.start_time) / 1e9 == pytest.approx(e2e_s, abs=ROUNDING_S)
        # Seconds, not ms: the engine's share fits inside what the user waited.
        assert 0 < e2e_s <= outcome.latency_ms / 1e3
        # The time model's floor (StepTimeModel defaults, divided by the speed): at least the prefill cost of
        # the prompt tokens the prefix cache did not serve (a request arriving after another with the same
        # system prompt was prefilled computes only the rest), and one step overhead per decoded token.
        time_model = StepTimeModel()
        computed_tokens = span.attributes["gen_ai.usage.prompt_tokens"] - cached.get(outcome.trace_id, 0)
        modeled_prefill_s = (time_model.step_overhead_s + computed_tokens * time_model.prefill_s_per_token) / speed
        modeled_decode_s = (outcome.workload.output_tokens - 1) * time_model.step_overhead_s / speed
        assert span.attributes["gen_ai.latency.time_in_model_prefill"] >= modeled_prefill_s - 1e-4
        assert span.attributes["gen_ai.latency.time_in_model_decode"] >= modeled_decode_s - 1e-4
