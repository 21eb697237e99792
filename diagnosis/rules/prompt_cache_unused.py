"""``prompt_cache_unused``: calls that re-send a prompt prefix get (almost) none of it from the provider's cache.

Client-side signal: the cached input tokens the provider reported for each model call (OpenAI's
``prompt_tokens_details.cached_tokens``, Anthropic's ``cache_read_input_tokens``, as :mod:`analysis.genai`
reads them from every instrumentation's spelling). A call B is *expected to reuse* an earlier call A's prompt
when B started within ``max_gap_s`` after A ended and

- B continues A: same request, and B's input grew by at least ``continuation_output_share`` of A's output (a
  chat API call after another re-sends the whole history, A's prompt included); the shared part is A's input;
- or both carry the same conversation key (``prefix_key_attributes``, e.g. GenAI ``gen_ai.conversation.id``); the
  shared part is the smaller input.

Only shared parts of ``min_shared_tokens`` or more count (providers cache prompts from 1,024 tokens), and only
calls that report a cached count (``0`` included; an instrumentation that omits the count says nothing). When the
median repeat got at most ``cached_share_unused`` of its shared part from the cache, the prefix is not reused:
the provider does not cache, or the start of the prompt changes from call to call.

Relation to ``prefix_cache_unused``: that rule judges vLLM's own prefix cache from its engine spans (prefill
time per token, engine metrics); this one judges whatever cache the provider runs from what the client was told,
and skips calls whose engine spans are traced (``engine``), so one fault is never named twice.
"""

from __future__ import annotations

import polars as pl
from pydantic import Field

from analysis.spans import attribute
from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, confidence, margin, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import continues_previous, top_traces, with_previous_call

CONTINUATION = "continuation"
"""The ``prefix_key_name`` of repeats found by one call continuing the previous one."""


class PromptCacheUnusedConfig(RuleConfig):
    prefix_key_attributes: list[str] = Field(
        description="Attributes of a model call whose equal values mean a shared conversation prefix, in preference "
        "order (GenAI semconv gen_ai.conversation.id)."
    )
    continuation_output_share: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of the previous call's output tokens by which a call's input must grow to count "
        "as its continuation (the same test as sequential_llm_calls).",
    )
    min_shared_tokens: int = Field(
        ge=1,
        description="Shared prompt tokens a repeat needs to be expected from the cache. Count. OpenAI caches prompts "
        "of 1,024 tokens or more, Anthropic from 1,024 (2,048 on its smallest models); shorter prompts are not "
        "cached there, so a miss says nothing.",
    )
    max_gap_s: float = Field(
        gt=0,
        description="Time between the earlier call's end and the repeat's start beyond which the cache may have "
        "expired (OpenAI and Anthropic keep prefixes about five minutes). Seconds.",
    )
    cached_share_unused: float = Field(
        ge=0,
        le=1,
        description="Cached tokens over shared prompt tokens (0..1; median over repeats) at or below which the "
        "repeats missed the cache.",
    )
    min_repeats: int = Field(ge=1, description="Repeats needed to judge the cache. Count.")
    missed_share_critical: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of all input tokens in the window that re-sent a prefix without a cache hit, at "
        "which it is critical: half of what the provider read was avoidable.",
    )
    full_confidence_repeats: int = Field(
        ge=2, description="Repeats at which the sample no longer limits confidence. Count."
    )


class PromptCacheUnused(Rule[PromptCacheUnusedConfig]):
    """See the module docstring."""

    cause = "prompt_cache_unused"
    config_model = PromptCacheUnusedConfig

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        repeats = self._repeats(ctx)
        if repeats.height < config.min_repeats:
            return None
        cached_share = float(repeats["cached_share"].median())
        if cached_share > config.cached_share_unused:
            return None
        calls = ctx.model_calls
        input_total = float(calls["input_tokens"].sum() or 0)
        missed = float(repeats["missed_tokens"].sum())
        missed_share = missed / input_total if input_total else 0.0
        severity = "critical" if missed_share >= config.missed_share_critical else "warning"
        base = 0.7 + 0.2 * margin(missed_share, 0.0, config.missed_share_critical)
        base += 0.1 * (1 - margin(cached_share, 0.0, config.cached_share_unused))
        key = repeats["key_name"].mode().sort().first()
        return Finding(
            cause=self.cause,
            title=f"{repeats.height} model calls re-send a prompt prefix of "
            f"{repeats['shared_tokens'].median():.0f} tokens but get {cached_share:.0%} of it from the provider's "
            "prompt cache",
            severity=severity,
            confidence=confidence(base, samples=repeats.height, full=config.full_confidence_repeats),
            evidence={
                "llm_call_count": calls.height,
                "repeat_call_count": repeats.height,
                "prefix_key_name": key,
                "shared_prefix_tokens_p50": repeats["shared_tokens"].median(),
                "cached_input_tokens_p50": repeats["cached_input_tokens"].median(),
                "repeat_cached_tokens_share": ratio(cached_share),
                "missed_input_tokens_total": int(missed),
                "missed_input_share": ratio(missed_share),
                "example_trace_ids": top_traces(repeats, "missed_tokens", EXAMPLE_TRACES),
            },
            remedy="Keep the start of every prompt byte-identical from call to call: static system prompt and tool "
            "definitions first, then the history, only ever appended; move timestamps, request ids and per-user "
            "data after the shared part. Where the provider needs it, mark the prefix (Anthropic cache_control "
            "breakpoints, OpenAI prompt_cache_key, Gemini cached content), keep the shared part over its minimum "
            "(1,024 tokens at OpenAI and Anthropic), and reuse it within the cache's lifetime.",
        )

    def _repeats(self, ctx: DiagnosisContext) -> pl.DataFrame:
        """Calls expected to reuse an earlier call's prompt (module docstring), one row each with the largest
        shared part: trace_id, index, key_name, shared_tokens, cached_input_tokens, cached_share, missed_tokens."""
        config = self.config
        gap_ns = round(config.max_gap_s * 1e9)
        calls = ctx.model_calls.filter(~pl.col("engine") & pl.col("input_tokens").is_not_null())
        follows = (pl.col("start_ns") >= pl.col("previous_end_ns")) & (
            pl.col("start_ns") - pl.col("previous_end_ns") <= gap_ns
        )
        continued = (
            with_previous_call(calls)
            .filter((follows & continues_previous(config.continuation_output_share)).fill_null(False))
            .select(
                "trace_id",
                "index",
                "cached_input_tokens",
                pl.lit(CONTINUATION).alias("key_name"),
                pl.col("previous_input_tokens").alias("shared_tokens"),
            )
        )
        keyed = [continued]
        for key in config.prefix_key_attributes:
            by_key = (
                calls.with_columns(attribute(key).alias("key"))
                .filter(pl.col("key").is_not_null())
                .sort("start_ns", "index")
                .with_columns(
                    pl.col("end_ns").shift(1).over("key").alias("previous_end_ns"),
                    pl.col("input_tokens").shift(1).over("key").alias("previous_input_tokens"),
                )
            )
            keyed.append(
                by_key.filter(follows.fill_null(False)).select(
                    "trace_id",
                    "index",
                    "cached_input_tokens",
                    pl.lit(key).alias("key_name"),
                    pl.min_horizontal("input_tokens", "previous_input_tokens").alias("shared_tokens"),
                )
            )
        return (
            pl.concat(keyed)
            .filter((pl.col("shared_tokens") >= config.min_shared_tokens) & pl.col("cached_input_tokens").is_not_null())
            .sort("shared_tokens", descending=True)
            .unique("index", keep="first", maintain_order=True)
            .with_columns(
                (pl.col("cached_input_tokens") / pl.col("shared_tokens")).clip(0, 1).alias("cached_share"),
                (pl.col("shared_tokens") - pl.col("cached_input_tokens")).clip(0).alias("missed_tokens"),
            )
        )
