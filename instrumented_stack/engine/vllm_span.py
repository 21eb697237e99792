"""vLLM's per-request span, ``llm_request``, written the way vLLM v1 writes it.

Sources (vllm-project/vllm): attribute names from ``SpanAttributes`` in ``vllm/tracing.py`` (later
``vllm/tracing/utils.py``); values from ``OutputProcessor.do_tracing`` in
``vllm/v1/engine/output_processor.py`` (v1 engine, span added by PR #20372):

- name ``llm_request``, kind SERVER, tracer ``vllm.llm_engine``;
- parent: the context extracted from the request's ``traceparent``/``tracestate`` only
  (``TRACE_HEADERS``; W3C baggage is not forwarded);
- start = arrival time; the span is recorded when the request finishes;
- latencies are **seconds** (floats): ``time_to_first_token`` = first token - arrival,
  ``e2e`` = finish - arrival, ``time_in_queue`` = scheduled - queued, ``time_in_model_prefill`` =
  first token - scheduled, ``time_in_model_decode`` = last token - first token,
  ``time_in_model_inference`` = last token - scheduled;
- ``gen_ai.response.finish_reasons`` is a JSON string (``'["length"]'``), not a string array;
- ``top_p``, ``max_tokens``, ``temperature`` and ``n`` are set only when truthy (so ``temperature=0``
  is absent).

vLLM v1 does not set ``gen_ai.response.model`` (its v1 tracing test, ``tests/v1/tracing/test_tracing.py``,
has that assertion commented out), nor ``gen_ai.usage.cached_tokens`` (defined in ``SpanAttributes``, not
written by ``do_tracing``), nor the v0-only ``time_in_scheduler``/``time_in_model_forward``/
``time_in_model_execute``. Neither does the emulator, so its spans carry real vLLM v1's attribute set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from opentelemetry.trace import SpanContext, SpanKind, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from instrumented_stack.engine.core import EngineRequest, EngineResult

LLM_REQUEST_SPAN_NAME = "llm_request"
VLLM_TRACER_NAME = "vllm.llm_engine"
TRACE_HEADERS: tuple[str, ...] = ("traceparent", "tracestate")
"""The only headers vLLM propagates into its span context."""


class VllmSpanAttributes:
    """Attribute names of vLLM's ``llm_request`` span (``vllm/tracing.py`` ``SpanAttributes``)."""

    LATENCY_TIME_TO_FIRST_TOKEN = "gen_ai.latency.time_to_first_token"
    LATENCY_E2E = "gen_ai.latency.e2e"
    LATENCY_TIME_IN_QUEUE = "gen_ai.latency.time_in_queue"
    LATENCY_TIME_IN_MODEL_PREFILL = "gen_ai.latency.time_in_model_prefill"
    LATENCY_TIME_IN_MODEL_DECODE = "gen_ai.latency.time_in_model_decode"
    LATENCY_TIME_IN_MODEL_INFERENCE = "gen_ai.latency.time_in_model_inference"
    USAGE_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
    USAGE_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
    REQUEST_ID = "gen_ai.request.id"
    REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
    REQUEST_TEMPERATURE = "gen_ai.request.temperature"
    REQUEST_TOP_P = "gen_ai.request.top_p"
    REQUEST_N = "gen_ai.request.n"
    RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"


LLM_REQUEST_ALWAYS_ATTRIBUTES: frozenset[str] = frozenset(
    {
        VllmSpanAttributes.LATENCY_TIME_TO_FIRST_TOKEN,
        VllmSpanAttributes.LATENCY_E2E,
        VllmSpanAttributes.LATENCY_TIME_IN_QUEUE,
        VllmSpanAttributes.LATENCY_TIME_IN_MODEL_PREFILL,
        VllmSpanAttributes.LATENCY_TIME_IN_MODEL_DECODE,
        VllmSpanAttributes.LATENCY_TIME_IN_MODEL_INFERENCE,
        VllmSpanAttributes.USAGE_PROMPT_TOKENS,
        VllmSpanAttributes.USAGE_COMPLETION_TOKENS,
        VllmSpanAttributes.REQUEST_ID,
        VllmSpanAttributes.RESPONSE_FINISH_REASONS,
    }
)
"""Attributes vLLM v1's ``OutputProcessor.do_tracing`` sets on every finished request."""

LLM_REQUEST_OPTIONAL_ATTRIBUTES: frozenset[str] = frozenset(
    {
        VllmSpanAttributes.REQUEST_TOP_P,
        VllmSpanAttributes.REQUEST_MAX_TOKENS,
        VllmSpanAttributes.REQUEST_TEMPERATURE,
        VllmSpanAttributes.REQUEST_N,
    }
)
"""Attributes set only when the request's value is truthy (``temperature=0`` leaves its attribute out)."""

LLM_REQUEST_ATTRIBUTES: frozenset[str] = LLM_REQUEST_ALWAYS_ATTRIBUTES | LLM_REQUEST_OPTIONAL_ATTRIBUTES
"""The single source of truth for the attribute set of vLLM v1's ``llm_request`` span (14 names), for a
request whose ``temperature``, ``top_p``, ``max_tokens`` and ``n`` are all non-zero.

Source: ``do_tracing`` in ``vllm/v1/engine/output_processor.py`` and ``SpanAttributes`` in
``vllm/tracing/utils.py`` (vllm-project/vllm main, read at output_processor commit ``d078226``, the
0.3x releases); REFERENCE.md's vLLM section lists the same names. The emulator's spans carry exactly this
set (``tests/instrumented_stack/test_vllm_backend.py``), and the device check
(``tools/device_check.py``) compares real vLLM's spans with it.
"""


def trace_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The ``traceparent``/``tracestate`` entries of ``headers`` (a case-insensitive mapping)."""
    return {name: headers[name] for name in TRACE_HEADERS if name in headers}


def llm_request_attributes(request: EngineRequest, result: EngineResult) -> dict[str, AttributeValue]:
    """The attributes vLLM v1 puts on ``llm_request`` for ``request`` and its ``result``."""
    t = result.timeline
    attrs = VllmSpanAttributes
    attributes: dict[str, AttributeValue] = {
        attrs.LATENCY_TIME_TO_FIRST_TOKEN: t.first_token_s - t.arrival_s,
        attrs.LATENCY_E2E: t.finished_s - t.arrival_s,
        attrs.LATENCY_TIME_IN_QUEUE: t.scheduled_s - t.queued_s,
        attrs.USAGE_PROMPT_TOKENS: request.prompt_tokens,
        attrs.USAGE_COMPLETION_TOKENS: result.completion_tokens,
        attrs.LATENCY_TIME_IN_MODEL_PREFILL: t.first_token_s - t.scheduled_s,
        attrs.LATENCY_TIME_IN_MODEL_DECODE: t.last_token_s - t.first_token_s,
        attrs.LATENCY_TIME_IN_MODEL_INFERENCE: t.last_token_s - t.scheduled_s,
        attrs.REQUEST_ID: request.request_id,
        attrs.RESPONSE_FINISH_REASONS: json.dumps([result.finish_reason]),
    }
    optional: dict[str, AttributeValue] = {
        attrs.REQUEST_TOP_P: request.top_p,
        attrs.REQUEST_MAX_TOKENS: request.max_tokens,
        attrs.REQUEST_TEMPERATURE: request.temperature,
        attrs.REQUEST_N: request.n,
    }
    attributes.update({name: value for name, value in optional.items() if value})
    return attributes


def record_llm_request_span(
    tracer: Tracer, headers: Mapping[str, str], request: EngineRequest, result: EngineResult
) -> SpanContext:
    """Record the finished request's ``llm_request`` span and return its span context.

    Args:
        tracer: the engine's tracer (scope :data:`VLLM_TRACER_NAME`).
        headers: the HTTP request headers; only :data:`TRACE_HEADERS` are read.
        request, result: what the engine core was asked and what it reported.

    The span starts at the arrival time and ends at the finish time of ``result.timeline``, so its
    duration equals ``gen_ai.latency.e2e``. Without a valid ``traceparent`` it is a root span.
    """
    parent = TraceContextTextMapPropagator().extract(trace_headers(headers))
    timeline = result.timeline
    span = tracer.start_span(
        LLM_REQUEST_SPAN_NAME,
        context=parent,
        kind=SpanKind.SERVER,
        attributes=llm_request_attributes(request, result),
        start_time=timeline.arrival_unix_ns,
    )
    span.end(end_time=timeline.unix_ns(timeline.finished_s))
    return span.get_span_context()
