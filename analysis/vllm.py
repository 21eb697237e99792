"""vLLM's ``llm_request`` span: its phases on the time axis, and per-call TTFT and TPOT.

vLLM v1 records one ``llm_request`` span per request (``vllm/v1/engine/output_processor.py``
``do_tracing``; attribute names in ``vllm/tracing.py`` ``SpanAttributes``). It starts at the request's
arrival, ends when the front end has the finished output, has no children, and carries its timings as
attributes in **seconds** (strings in the attribute map):

- ``gen_ai.latency.time_in_queue`` = scheduled - queued,
- ``gen_ai.latency.time_in_model_prefill`` = first token - scheduled,
- ``gen_ai.latency.time_in_model_decode`` = last token - first token,
- ``gen_ai.latency.time_to_first_token`` = first token - arrival.

Phases of a span ``[start, end]`` (:func:`phase_boundaries`): with TTFT, ``first_token = start + ttft``;
without it, the queue is assumed to begin at arrival, so ``first_token = start + queue + prefill``. Then
``scheduled = first_token - prefill``, ``queued = scheduled - queue``, ``last_token = first_token + decode``;
each boundary is clipped to the span and kept in order. The span is then tiled, exactly, by

- ``llm.tokenize``   ``[start, queued)``: the front end's input processing between arrival and the engine
  core's queue (tokenization when the prompt arrives as text, multimodal inputs, IPC),
- ``llm.queue``      ``[queued, scheduled)``,
- ``llm.prefill``    ``[scheduled, first_token)``,
- ``llm.decode``     ``[first_token, last_token)``,
- ``llm.detokenize`` ``[last_token, end)``: output processing after the last token (detokenization, the
  response, IPC back).

so the five phases always sum to the span's duration, and any part of the span the critical path keeps
splits the same way. The first and last phases are what the attributes leave unexplained (the engine's
clocks are monotonic, TTFT and the span wall-clock, so a few µs of disagreement land there too).

TPOT follows vLLM's ``vllm:request_time_per_output_token_seconds`` (``vllm/v1/metrics/stats.py``,
``FinishedRequestStats``): decode time / (generated tokens - 1), since the first token belongs to prefill;
undefined below two tokens.
"""

from __future__ import annotations

from itertools import pairwise

import polars as pl

from analysis.spans import attribute, integer_attribute, prepare_spans, seconds_attribute_ns

TIME_IN_QUEUE = "gen_ai.latency.time_in_queue"
TIME_IN_PREFILL = "gen_ai.latency.time_in_model_prefill"
TIME_IN_DECODE = "gen_ai.latency.time_in_model_decode"
TIME_TO_FIRST_TOKEN = "gen_ai.latency.time_to_first_token"
COMPLETION_TOKENS = ("gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens")
PROMPT_TOKENS = ("gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens")
MODEL = ("gen_ai.request.model", "gen_ai.response.model")

PHASES = ("llm.tokenize", "llm.queue", "llm.prefill", "llm.decode", "llm.detokenize")
"""The stages a split span is tiled into, in time order."""
BOUNDARIES = ("queued_ns", "scheduled_ns", "first_token_ns", "last_token_ns")
"""Inner boundaries between consecutive :data:`PHASES`."""


def phase_boundaries(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` (prepared spans) with the four inner phase boundaries added as Int64 ns columns
    (:data:`BOUNDARIES`); all four are null where queue, prefill or decode time is missing."""
    start, end = pl.col("start_time_unix_nano"), pl.col("end_time_unix_nano")
    queue, prefill, decode, ttft = (pl.col(f"_{name}") for name in ("queue", "prefill", "decode", "ttft"))
    timed = frame.with_columns(
        seconds_attribute_ns(TIME_IN_QUEUE).alias("_queue"),
        seconds_attribute_ns(TIME_IN_PREFILL).alias("_prefill"),
        seconds_attribute_ns(TIME_IN_DECODE).alias("_decode"),
        seconds_attribute_ns(TIME_TO_FIRST_TOKEN).alias("_ttft"),
    ).with_columns(pl.coalesce(start + ttft, start + queue + prefill).alias("_first_token"))
    first_token = pl.col("_first_token")
    raw = {
        "queued_ns": first_token - prefill - queue,
        "scheduled_ns": first_token - prefill,
        "first_token_ns": first_token,
        "last_token_ns": first_token + decode,
    }
    timed = timed.with_columns(expression.clip(start, end).alias(name) for name, expression in raw.items())
    # Each boundary is kept at or after the previous one.
    for earlier, later in pairwise(BOUNDARIES):
        timed = timed.with_columns(pl.max_horizontal(earlier, later).alias(later))
    usable = queue.is_not_null() & prefill.is_not_null() & decode.is_not_null()
    return timed.with_columns(pl.when(usable).then(pl.col(BOUNDARIES)).name.keep()).drop(
        "_queue", "_prefill", "_decode", "_ttft", "_first_token"
    )


def llm_calls(spans: pl.DataFrame) -> pl.DataFrame:
    """Timings of every span that reports an engine's latencies: vLLM's ``llm_request`` (``gen_ai.latency.*``).
    Client-side model calls of every convention are :func:`analysis.model_calls.model_calls`.

    Args:
        spans: a span frame (contract in :mod:`analysis.spans`).

    Returns:
        One row per such span, in input order: trace_id, span_id, service_name, name (String);
        start_time_unix_nano (Int64 ns since the epoch); duration_ns, queue_ns, prefill_ns, decode_ns,
        ttft_ns (Int64 ns, null where not reported or unreadable); prompt_tokens, completion_tokens (Int64,
        null where not reported); tpot_ns (Float64 ns per output token after the first, null below two tokens
        or without decode time); model (String, ``gen_ai.request.model`` else ``gen_ai.response.model``).

    Raises:
        ValueError: the frame breaks the input contract.
    """
    return calls_of_prepared(prepare_spans(spans))


def calls_of_prepared(frame: pl.DataFrame) -> pl.DataFrame:
    """:func:`llm_calls` of a frame already through :func:`analysis.spans.prepare_spans`."""
    attributes = pl.col("attributes")
    reports = attributes.map.contains_key(TIME_TO_FIRST_TOKEN) | attributes.map.contains_key(TIME_IN_DECODE)
    decode = seconds_attribute_ns(TIME_IN_DECODE)
    tokens_after_first = pl.col("completion_tokens") - 1
    return (
        frame.filter(reports)
        .select(
            "trace_id",
            "span_id",
            "service_name",
            "name",
            "start_time_unix_nano",
            (pl.col("end_time_unix_nano") - pl.col("start_time_unix_nano")).alias("duration_ns"),
            seconds_attribute_ns(TIME_IN_QUEUE).alias("queue_ns"),
            seconds_attribute_ns(TIME_IN_PREFILL).alias("prefill_ns"),
            decode.alias("decode_ns"),
            seconds_attribute_ns(TIME_TO_FIRST_TOKEN).alias("ttft_ns"),
            pl.coalesce(*(integer_attribute(key) for key in PROMPT_TOKENS)).alias("prompt_tokens"),
            pl.coalesce(*(integer_attribute(key) for key in COMPLETION_TOKENS)).alias("completion_tokens"),
            pl.coalesce(*(attribute(key) for key in MODEL)).alias("model"),
        )
        .with_columns(
            pl.when(tokens_after_first >= 1)
            .then(pl.col("decode_ns").cast(pl.Float64) / tokens_after_first)
            .alias("tpot_ns")
        )
        .select(
            "trace_id",
            "span_id",
            "service_name",
            "name",
            "start_time_unix_nano",
            "duration_ns",
            "queue_ns",
            "prefill_ns",
            "decode_ns",
            "ttft_ns",
            "prompt_tokens",
            "completion_tokens",
            "tpot_ns",
            "model",
        )
    )
