"""``prefix_cache_unused``: prompts that share a prefix are prefilled in full every time.

Trace signal: engine calls that share a prompt key (a conversation, a prompt-prefix hash, or the whole
prompt's hash, from ``prefix_key_attributes`` on the engine span or its calling client span; else the
conversation the call's request is a turn of, wherever its trace names it: an agent names it on its own span, and
a chat client resends a conversation's history with every turn) arrive after an earlier call of the same key has
prefilled, yet compute their prompt at the same cost per token as that first
call (``time_in_model_prefill / prompt tokens``), or report next to no cached tokens. A working prefix cache
leaves a repeat only its new suffix to compute.

Metrics: ``vllm:prefix_cache_queries`` not growing while prompt tokens are processed means prefix caching is
off (vLLM records no lookups then); hits over queries near zero while traces show shared prefixes means the
cache does not keep them (evicted, or the shared part is not at the start of the prompt).

A conversation is the weakest key (a session may group turns that resend no history): when repeats keyed by
one miss while the cache serves other calls of the window (``min_repeats`` of them report more than
``cached_share_unused`` cached), the cache works and the finding is ``info``.

A window without shared keys says nothing either way (nothing to reuse), so the rule stays silent there unless
the metrics show caching switched off.

Slow prefill alone is not a cache signal: a repeat's prefill per token also stays high when its new suffix is
most of the prompt, when batching or a contended host stretches it (``cpu_contention``), or when the engine's
step overhead dominates a short computation. So repeats judged by timing alone, with no cached-token count on
the spans and no cache metrics agreeing, make an ``info`` finding with a confidence discounted under contention
(:mod:`diagnosis.contention`); ``warning`` and ``critical`` need a cache signal: caching switched off, cached
tokens reported near zero, or a hit rate near zero.
"""

from __future__ import annotations

import polars as pl
from pydantic import Field

from analysis.conversation import CONVERSATION_KEYS
from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, Severity, confidence, margin, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import top_traces

REQUEST_CONVERSATION = "request conversation"
"""``prefix_key_name`` of calls keyed by the conversation their request is a turn of."""


class PrefixCacheUnusedConfig(RuleConfig):
    prefix_key_attributes: list[str] = Field(
        min_length=1,
        description="Attributes whose equal values mean equal prompt prefixes, in preference order, read on the "
        "engine span, then on its calling client span: a conversation ID (GenAI semconv "
        "gen_ai.conversation.id), a hash of the prompt's prefix, or a hash of the whole prompt. A call naming "
        "none of the keys up to the first conversation key listed is keyed by its request's conversation "
        "(analysis.conversation.CONVERSATION_KEYS on any span of its trace, named "
        f"{REQUEST_CONVERSATION!r} in the evidence) before the later keys are read.",
    )
    cached_tokens_attributes: list[str] = Field(
        description="Attributes reporting prompt tokens served from the cache (vLLM gen_ai.usage.cached_tokens, "
        "semconv gen_ai.usage.cache_read.input_tokens); used instead of prefill timing when present."
    )
    min_repeats: int = Field(
        ge=1, description="Calls that repeat an earlier call's key needed to judge the cache. Count."
    )
    min_repeat_share: float = Field(
        ge=0,
        le=1,
        description="Repeats as a share (0..1) of engine calls below which prefix reuse is too rare to matter.",
    )
    prefill_ratio_unused: float = Field(
        gt=0,
        description="A repeat's prefill time per prompt token over its key's first call's (ratio; median over "
        "repeats) at or above which the repeat recomputed its prefix. A hit leaves only the new suffix "
        "(and one engine step) to compute, well under half the cost; 0.7 leaves room for batching noise.",
    )
    cached_share_unused: float = Field(
        ge=0,
        le=1,
        description="Cached tokens over prompt tokens (0..1; median over repeats) at or below which the repeats "
        "missed the cache.",
    )
    hit_share_unused: float = Field(
        ge=0,
        le=1,
        description="vllm:prefix_cache_hits / queries (0..1) below which the cache serves next to nothing.",
    )
    prefill_share_critical: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of end-to-end latency in llm.prefill at which recomputing shared prefixes is "
        "critical: prefill is then a large, avoidable stage.",
    )
    full_confidence_repeats: int = Field(
        ge=2, description="Repeats at which the sample no longer limits confidence. Count."
    )


class PrefixCacheUnused(Rule[PrefixCacheUnusedConfig]):
    """See the module docstring."""

    cause = "prefix_cache_unused"
    config_model = PrefixCacheUnusedConfig
    latency_share = "prefill_share"
    stage = "llm.prefill"

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        metrics = ctx.metrics
        disabled = metrics is not None and metrics.prefix_caching_disabled
        hit_share = metrics.prefix_cache_hit_share if metrics else None
        repeats, key_name, served = self._repeats(ctx)
        calls = ctx.llm_calls.height
        repeat_share = repeats.height / calls if calls else 0.0
        shared = repeats.height >= config.min_repeats and repeat_share >= config.min_repeat_share
        prefill_ratio = repeats["prefill_ratio"].drop_nulls().median() if repeats.height else None
        cached_share = repeats["cached_share"].drop_nulls().median() if repeats.height else None
        if cached_share is not None:
            unused = cached_share <= config.cached_share_unused
        else:
            unused = prefill_ratio is not None and prefill_ratio >= config.prefill_ratio_unused
        prefill_share = ctx.stage_share("llm.prefill")
        if disabled:
            base = 0.9 if shared else 0.6
            title = "Prefix caching is disabled on the engine" + (
                f": {repeats.height} calls resent a prefix it could have reused" if shared else ""
            )
            remedy = (
                "Turn vLLM's prefix caching back on (it is on by default in vLLM v1: drop "
                "--no-enable-prefix-caching / enable_prefix_caching=False). Agent prompts repeat the system "
                "prompt, tool definitions and conversation history, which the cache serves without recomputing."
            )
        elif shared and unused:
            if hit_share is None:
                base = 0.7
            elif hit_share < config.hit_share_unused:
                base = 0.9
            else:
                # The engine reports hits, yet these repeats paid full price: other traffic gets the hits.
                base = 0.5
            title = f"{repeats.height} engine calls repeat a prompt prefix but prefill it in full"
            remedy = (
                "Keep the shared part of prompts byte-identical and first (system prompt, tool definitions, then "
                "history; no timestamps or request IDs before them), route a conversation's calls to the same engine "
                "replica (prefix-aware routing), and leave the KV cache room (gpu_memory_utilization, fewer "
                "max_num_seqs) so prefixes survive until they are reused."
            )
        else:
            return None
        cache_signal = (
            disabled or cached_share is not None or (hit_share is not None and hit_share < config.hit_share_unused)
        )
        severity: Severity = "critical" if shared and prefill_share >= config.prefill_share_critical else "warning"
        base += 0.1 * margin(prefill_share, 0.0, config.prefill_share_critical)
        # Without shared keys the confidence rests on the metrics alone, not on a sample of repeats.
        samples = repeats.height if shared else config.full_confidence_repeats
        found = confidence(base, samples=samples, full=config.full_confidence_repeats)
        # Equal conversations are the weakest key: a session may group turns that resend no history. Where the
        # cache serves other calls of the window, it works, and such turns' misses say nothing about it.
        if key_name not in (*CONVERSATION_KEYS, REQUEST_CONVERSATION):
            served = 0
        if not cache_signal:
            severity, found = "info", ctx.contention.discount(found)
            title += " (prefill timing alone: no cached-token count or cache metric confirms it)"
        elif not disabled and served >= config.min_repeats:
            severity = "info"
            title += f" (the cache served {served} other calls: these turns may share no history)"
        return Finding(
            cause=self.cause,
            title=title,
            severity=severity,
            confidence=found,
            evidence={
                "llm_call_count": calls,
                "repeat_call_count": repeats.height,
                "repeat_share": ratio(repeat_share),
                "prefix_key_name": key_name,
                "repeat_prefill_ratio": ratio(prefill_ratio),
                "repeat_cached_tokens_share": ratio(cached_share),
                "cache_served_call_count": served,
                "prefill_share": ratio(prefill_share),
                "prefix_cache_hit_share": ratio(hit_share),
                "prefix_cache_queries_tokens": metrics.prefix_cache_queries_tokens if metrics else None,
                "prompt_tokens_processed_tokens": metrics.prompt_tokens if metrics else None,
                "metrics_source": metrics.source if metrics else None,
                "cpu_contention_level_ratio": ratio(ctx.contention.level),
                "example_trace_ids": top_traces(repeats, "prefill_ns", EXAMPLE_TRACES),
            },
            remedy=remedy,
        )

    def _repeats(self, ctx: DiagnosisContext) -> tuple[pl.DataFrame, str | None, int]:
        """Engine calls repeating an earlier call's prompt key after that call's prefill ended, with their
        prefill cost relative to it (``prefill_ratio``) and cached share; the key attribute used most; and the
        engine calls of the window, keyed or not, reporting more than ``cached_share_unused`` of their prompt
        cached (the cache serving them)."""
        config = self.config
        keys = config.prefix_key_attributes
        named = [(key, ctx.llm_attribute([key])) for key in keys]
        # The request's conversation ranks as a conversation key does: right after the first one listed.
        conversation = next((i + 1 for i, key in enumerate(keys) if key in CONVERSATION_KEYS), len(keys))
        named.insert(conversation, (REQUEST_CONVERSATION, pl.col("conversation_id")))
        cached = ctx.llm_attribute(config.cached_tokens_attributes).cast(pl.Int64, strict=False)
        window = ctx.llm_calls.join(
            ctx.request_conversations, on="trace_id", how="left", maintain_order="left"
        ).with_columns(
            pl.coalesce(*(value for _, value in named)).alias("key"),
            pl.coalesce(*(pl.when(value.is_not_null()).then(pl.lit(name)) for name, value in named)).alias("key_name"),
            (cached / pl.col("prompt_tokens")).alias("cached_share"),
            (pl.col("prefill_ns") / pl.col("prompt_tokens")).alias("per_token_ns"),
        )
        served = int((window["cached_share"] > config.cached_share_unused).sum())
        calls = window.filter(pl.col("key").is_not_null())
        if calls.height == 0:
            return calls.with_columns(pl.lit(None, dtype=pl.Float64).alias("prefill_ratio")), None, served
        ordered = calls.sort("start_time_unix_nano")
        first = pl.col("first_token_ns").fill_null(pl.col("start_time_unix_nano") + pl.col("duration_ns"))
        repeats = (
            ordered.with_columns(
                first.first().over("key").alias("prefix_ready_ns"),
                pl.col("per_token_ns").first().over("key").alias("first_per_token_ns"),
                pl.int_range(pl.len()).over("key").alias("position"),
            )
            .filter((pl.col("position") > 0) & (pl.col("start_time_unix_nano") >= pl.col("prefix_ready_ns")))
            .with_columns(
                pl.when(pl.col("first_per_token_ns") > 0)
                .then(pl.col("per_token_ns") / pl.col("first_per_token_ns"))
                .alias("prefill_ratio"),
            )
        )
        key_name = calls["key_name"].mode().sort().first() if calls.height else None
        return repeats, key_name, served
