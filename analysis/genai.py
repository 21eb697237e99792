"""What LLM instrumentations write about a model call, read into one shape: model, provider, token usage and
the first-token instant.

Instrumentations spell the same facts differently; the tables below list, per fact, the attribute keys each
convention uses, in the order they are tried (the first present wins). Sources:

- OpenTelemetry GenAI semantic conventions (``gen_ai.*``; open-telemetry/semantic-conventions-genai,
  earlier ``docs/gen-ai`` of open-telemetry/semantic-conventions): ``gen_ai.request.model``,
  ``gen_ai.response.model``, ``gen_ai.provider.name`` (was ``gen_ai.system``), ``gen_ai.usage.input_tokens`` /
  ``output_tokens`` (were ``prompt_tokens`` / ``completion_tokens``), ``gen_ai.usage.cache_read.input_tokens``,
  ``gen_ai.usage.reasoning.output_tokens``, ``gen_ai.response.time_to_first_chunk`` (s); pydantic-ai writes
  ``gen_ai.client.operation.time_to_first_chunk`` (s); Strands Agents ``gen_ai.server.time_to_first_token``
  (**ms**, see :data:`FIRST_TOKEN_MS_KEYS`).
- vLLM v1's ``llm_request`` span (``vllm/tracing.py`` ``SpanAttributes``): ``gen_ai.usage.prompt_tokens`` /
  ``completion_tokens``, ``gen_ai.latency.time_to_first_token`` (s).
- OpenInference (Arize, ``openinference-semantic-conventions``): ``llm.model_name``, ``llm.provider``,
  ``llm.system``, ``llm.token_count.prompt`` / ``completion`` / ``total``,
  ``llm.token_count.prompt_details.cache_read``, ``llm.token_count.completion_details.reasoning``, and the span
  event ``First Token Stream Event`` its OpenAI instrumentation records on the first streamed chunk.
- OpenLLMetry / Traceloop (``opentelemetry-semantic-conventions-ai``): ``gen_ai.usage.prompt_tokens`` /
  ``completion_tokens``, ``gen_ai.usage.cache_read_input_tokens``, ``llm.usage.total_tokens``.
- Vercel AI SDK telemetry (``ai`` package, docs "AI SDK Core: Telemetry"): ``ai.model.id``,
  ``ai.model.provider``, ``ai.usage.promptTokens`` / ``completionTokens`` (v4), ``ai.usage.inputTokens`` /
  ``outputTokens`` / ``cachedInputTokens`` / ``reasoningTokens`` (v5), ``ai.response.msToFirstChunk`` (ms;
  ``ai.stream.msToFirstChunk`` on ``streamObject``) and the span event ``ai.stream.firstChunk``.
- Claude Code's ``claude_code.llm_request`` span (``span.type=llm_request``; code.claude.com "Monitoring"): bare
  ``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_creation_tokens`` with the Anthropic API's
  meaning (``input_tokens`` leaves out the prompt tokens read from or written to the prompt cache; see
  :data:`CLAUDE_CODE_SPAN_TYPE`) and ``ttft_ms`` (**ms** after the request's start).
- MLflow Tracing (its OTLP export; every attribute value JSON-encoded): ``mlflow.llm.model`` (a JSON string),
  ``mlflow.chat.tokenUsage`` (a JSON object: ``input_tokens``, ``output_tokens``, ``total_tokens``,
  ``cache_read_input_tokens``; OpenAI's meaning, cached tokens part of the input) and, streamed, one span event
  ``mlflow.chunk.item.<n>`` per chunk (``mlflow.chunk.item.0``: the first).
- Prompt Flow tracing (``promptflow-tracing`` 1.18.5, ``promptflow/tracing/_trace.py``): ``llm.response.model``
  and, from the OpenAI response's usage, ``llm.usage.prompt_tokens`` / ``completion_tokens`` / ``total_tokens``
  on its ``span_type=LLM`` spans (a streamed call's are counted with ``tiktoken`` by the library, not the
  server's); its parents' ``__computed__.cumulative_token_count.*`` sums are not read.
- Langfuse SDK v3 (OpenTelemetry-based): ``langfuse.observation.model.name``,
  ``langfuse.observation.usage_details`` (a JSON object whose keys are usage types: ``input``, ``output``,
  ``input_cached_tokens`` / ``cache_read_input_tokens``, ``output_reasoning_tokens`` ...) and
  ``langfuse.observation.completion_start_time`` (the first token's ISO-8601 time).

Token semantics: ``input_tokens`` counts every prompt token, cached ones included (OpenAI's ``prompt_tokens``,
GenAI semconv's ``gen_ai.usage.input_tokens``); ``cached_input_tokens`` is the part served from a prompt cache
(so uncached input is the difference); ``reasoning_tokens`` is part of ``output_tokens``.
"""

from __future__ import annotations

import polars as pl

from analysis.spans import attribute, integer_attribute, whole_number

MODEL_KEYS = (
    "gen_ai.response.model",
    "gen_ai.request.model",
    "llm.model_name",
    "ai.model.id",
    "langfuse.observation.model.name",
    "mlflow.llm.model",
    "llm.response.model",
    "model",
)
"""The model a call used, most specific first (the response names the exact snapshot). Values are read with
surrounding JSON quotes stripped (MLflow's are JSON strings). The bare ``model`` comes last: the coding agents'
request spans name their model only so (the Codex CLI's ``model_client.stream_responses_api``, 0.171.0), or
beside a convention's key (Claude Code's ``claude_code.llm_request``, 2.1), and MLflow writes the request's
``model`` parameter there too; read on model-call spans only."""
ENGINE_MODEL_KEYS = ("vllm.config.model",)
"""Resource attributes naming the model an engine serves (``instrumented_stack.engine.config_resource``: vLLM's
``--served-model-name``, set with ``OTEL_RESOURCE_ATTRIBUTES``): vLLM v1's ``llm_request`` names no model, so an
engine call none of its chain's spans names a model for (an engine whose clients send no ``traceparent``, as
Claude Code) takes its engine's (:func:`engine_model`)."""
PROVIDER_KEYS = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system", "ai.model.provider")
USAGE_DETAILS_KEYS = (
    "langfuse.observation.usage_details",
    "gen_ai.usage.raw",
    "langsmith.metadata.usage_metadata",
    "mlflow.chat.tokenUsage",
)
"""Attributes holding a call's usage as a JSON object: Langfuse's usage types, Logfire's raw provider usage,
LangSmith's OTel export of LangChain's ``UsageMetadata`` (``input_token_details.cache_read``,
``output_token_details.reasoning``; its ``gen_ai.usage.input_token_details`` is a Python repr, not JSON), MLflow's
token usage."""

TOKEN_KEYS: dict[str, tuple[str, ...]] = {
    "input_tokens": (
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.prompt_tokens",
        "llm.token_count.prompt",
        "ai.usage.inputTokens",
        "ai.usage.promptTokens",
        "llm.usage.prompt_tokens",
    ),
    "output_tokens": (
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.completion_tokens",
        "llm.token_count.completion",
        "ai.usage.outputTokens",
        "ai.usage.completionTokens",
        "llm.usage.completion_tokens",
    ),
    "cached_input_tokens": (
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
        "gen_ai.usage.cached_tokens",
        "llm.token_count.prompt_details.cache_read",
        "ai.usage.cachedInputTokens",
    ),
    "reasoning_tokens": (
        "gen_ai.usage.reasoning.output_tokens",
        "gen_ai.usage.reasoning_tokens",
        "llm.token_count.completion_details.reasoning",
        "ai.usage.reasoningTokens",
    ),
}
"""Per token count, the attribute keys that carry it."""
USAGE_DETAILS_FIELDS: dict[str, tuple[str, ...]] = {
    "input_tokens": ("input", "prompt_tokens", "input_tokens"),
    "output_tokens": ("output", "completion_tokens", "output_tokens"),
    "cached_input_tokens": (
        "input_cached_tokens",
        "cache_read_input_tokens",
        "input_cache_read",
        "cached_tokens",
        "prompt_tokens_details.cached_tokens",
        "input_token_details.cache_read",
    ),
    "reasoning_tokens": (
        "output_reasoning_tokens",
        "reasoning_tokens",
        "output_reasoning",
        "completion_tokens_details.reasoning_tokens",
        "output_token_details.reasoning",
    ),
}
"""Per token count, the keys of the usage JSON objects' (:data:`USAGE_DETAILS_KEYS`) JSON that carry it."""
TOKEN_COLUMNS = tuple(TOKEN_KEYS)

FIRST_TOKEN_SECONDS_KEYS = (
    "gen_ai.response.time_to_first_chunk",
    "gen_ai.client.operation.time_to_first_chunk",
    "gen_ai.latency.time_to_first_token",
)
"""Attributes holding the first token's delay after the span's start, in seconds."""
FIRST_TOKEN_MS_KEYS = (
    "ai.response.msToFirstChunk",
    "ai.stream.msToFirstChunk",
    "ttft_ms",
    "gen_ai.server.time_to_first_token",
)
"""Attributes holding the first token's delay after the span's start, in milliseconds: the Vercel AI SDK's
(``ai.response.msToFirstChunk`` on ``doStream`` spans, ``ai.stream.msToFirstChunk`` on ``streamObject``'s),
Strands Agents' ``gen_ai.server.time_to_first_token`` on its model-call span (``strands/telemetry/tracer.py``
sets it from the event loop's ``timeToFirstByteMs``, an integer of ms after the request was sent; the GenAI
semconv *metric* of that name is in seconds, but no span convention defines the attribute), and Claude Code's and
Qwen Code's ``ttft_ms`` on their ``<product>.llm_request``. ``ttft_ms`` comes before the Strands key: Qwen Code
writes both, that one in seconds. Read on model-call spans only."""
FIRST_TOKEN_TIME_KEYS = ("langfuse.observation.completion_start_time",)
"""Attributes holding the first token's wall-clock time as ISO 8601 (possibly JSON-quoted)."""
FIRST_TOKEN_EVENTS = (
    "First Token Stream Event",
    "ai.stream.firstChunk",
    "gen_ai.content.completion.chunk",
    "gen_ai.first_chunk",
    "first_token",
    "mlflow.chunk.item.0",
)
"""Span events recorded when the first chunk arrives (OpenLLMetry records one per chunk: the earliest counts)."""
REQUEST_START_EVENTS = ("gen_ai.request.attempt",)
"""Span events recorded when an LLM call sends a request (Claude Code: one per attempt, attribute ``attempt``;
observed with 2.1.197, tests/realworld/claude_code); the earliest is when the call's first request left."""


CLAUDE_CODE_SPAN_TYPE = "llm_request"
"""``span.type`` of Claude Code's model-call span, whose usage attributes are bare and mean what the Anthropic
Messages API's ``usage`` means: ``input_tokens`` counts only the prompt tokens after the last cache breakpoint,
``cache_read_tokens`` and ``cache_creation_tokens`` the ones read from and written to the prompt cache
(docs.anthropic.com, "Prompt caching": total input = the three summed). Hotspan's ``input_tokens`` counts every
prompt token, so it is their sum there, and ``cached_input_tokens`` the cache reads."""


def _claude_code_usage() -> dict[str, pl.Expr]:
    """Per token column, Claude Code's count on its model-call span (:data:`CLAUDE_CODE_SPAN_TYPE`), null on
    every other span."""
    own = attribute("span.type") == CLAUDE_CODE_SPAN_TYPE
    read, written = _first_int(("cache_read_tokens",)), _first_int(("cache_creation_tokens",))
    return {
        "input_tokens": pl.when(own).then(_first_int(("input_tokens",)) + read.fill_null(0) + written.fill_null(0)),
        "output_tokens": pl.when(own).then(_first_int(("output_tokens",))),
        "cached_input_tokens": pl.when(own).then(read),
    }


def _first_int(keys: tuple[str, ...]) -> pl.Expr:
    return pl.coalesce(*(integer_attribute(key) for key in keys))


def _usage_detail(fields: tuple[str, ...]) -> pl.Expr:
    return pl.coalesce(
        *(
            whole_number(attribute(key).str.json_path_match(f"$.{field}").cast(pl.Float64, strict=False))
            for key in USAGE_DETAILS_KEYS
            for field in fields
        )
    )


def usage_columns() -> list[pl.Expr]:
    """Expressions over a prepared span frame (:mod:`analysis.spans`): model, provider (String, null when
    absent) and :data:`TOKEN_COLUMNS` (Int64, null when the span reports none; negative counts read as null)."""
    claude_code = _claude_code_usage()
    tokens = [
        pl.coalesce(
            _first_int(keys), _usage_detail(USAGE_DETAILS_FIELDS[name]), claude_code.get(name, pl.lit(None))
        ).alias(name)
        for name, keys in TOKEN_KEYS.items()
    ]
    return [
        pl.coalesce(*(attribute(key).str.strip_chars('"') for key in MODEL_KEYS)).alias("model"),
        pl.coalesce(*(attribute(key) for key in PROVIDER_KEYS)).alias("provider"),
        *(pl.when(token >= 0).then(token).alias(token.meta.output_name()) for token in tokens),
    ]


def engine_model(frame: pl.DataFrame) -> pl.Series:
    """Per span of a prepared frame, the model its resource says its engine serves (:data:`ENGINE_MODEL_KEYS`,
    String); null where the resource names none or the frame has no ``resource_attributes`` column."""
    if "resource_attributes" not in frame.columns:
        return pl.Series("model", [None] * frame.height, dtype=pl.String)
    keys = (attribute(key, "resource_attributes").str.strip_chars('"') for key in ENGINE_MODEL_KEYS)
    return frame.select(pl.coalesce(*keys).replace("", None).alias("model")).to_series()


EVENT_COLUMNS = ("event_names", "event_times_unix_nano")
"""The span frame's event columns (optional: a frame without them has no events to read)."""


def event_columns(frame: pl.DataFrame) -> list[str]:
    """Those of :data:`EVENT_COLUMNS` that ``frame`` has."""
    return [name for name in EVENT_COLUMNS if name in frame.columns]


def _earliest_event(names: tuple[str, ...]) -> pl.Expr:
    """The earliest time (Int64 ns) among a span's events named in ``names``; null when it has none."""
    matching = pl.col("event_names").list.eval(pl.element().is_in(names).arg_true())
    return pl.col("event_times_unix_nano").list.gather(matching).list.min().cast(pl.Int64)


def request_start_ns(frame: pl.DataFrame) -> pl.Series:
    """Per span of a prepared frame, the earliest :data:`REQUEST_START_EVENTS` event (Int64 ns since the epoch,
    clipped to the span), or null when it has none or the frame has no :data:`EVENT_COLUMNS`."""
    if len(event_columns(frame)) < len(EVENT_COLUMNS):
        return pl.Series("request_start_ns", [None] * frame.height, dtype=pl.Int64)
    instant = _earliest_event(REQUEST_START_EVENTS).clip(pl.col("start_time_unix_nano"), pl.col("end_time_unix_nano"))
    return frame.select(instant.alias("request_start_ns")).to_series()


def first_token_ns(frame: pl.DataFrame) -> pl.Series:
    """Per span of a prepared frame, the instant its first token arrived (Int64 ns since the epoch), or null
    when the span does not tell. Sources, first present wins: the seconds / milliseconds delay attributes, the
    ISO-8601 time attribute, the earliest first-chunk event (when the frame has ``event_names`` and
    ``event_times_unix_nano``). Instants outside the span are clipped to it."""
    start, end = pl.col("start_time_unix_nano"), pl.col("end_time_unix_nano")
    delays = [
        *(whole_number(attribute(key).cast(pl.Float64, strict=False), 1e9) for key in FIRST_TOKEN_SECONDS_KEYS),
        *(whole_number(attribute(key).cast(pl.Float64, strict=False), 1e6) for key in FIRST_TOKEN_MS_KEYS),
    ]
    candidates = [
        *(start + delay for delay in delays),
        *(
            attribute(key)
            .str.strip_chars('"')
            .str.to_datetime(time_unit="ns", time_zone="UTC", strict=False)
            .dt.epoch("ns")
            for key in FIRST_TOKEN_TIME_KEYS
        ),
    ]
    if len(event_columns(frame)) == len(EVENT_COLUMNS):
        candidates.append(_earliest_event(FIRST_TOKEN_EVENTS))
    instant = pl.coalesce(*candidates).clip(start, end)
    return frame.select(instant.alias("first_token_ns")).to_series()
