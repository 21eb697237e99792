"""``slow_first_token``: model calls wait long for their first token, compared with how fast they then stream.

Client-side signal: each model call's time to first token as the client saw it
(:attr:`~diagnosis.context.DiagnosisContext.model_calls` ``ttft_ns``: GenAI ``time_to_first_chunk``,
OpenInference's first-token event, Vercel's ``msToFirstChunk``, Langfuse's ``completion_start_time`` ...; vLLM's
own ``time_to_first_token`` only when no client span tells it) and the streaming after it (``stream_ns``). The
cause holds when both:

- the median call waits ``ttft_ms_warning`` or more for its first token (against a fixed threshold), and
- the wait is at least ``first_token_call_share_min`` of the calls' time (against the window's own baseline: the
  same calls' streaming), so the start is slow, not the generation.

Calls whose first token is unknown (not streamed, or an instrumentation that does not record it) are left out.
Severity grows with the ``llm.first_token`` stage's share of end-to-end latency on the critical path.
"""

from __future__ import annotations

import polars as pl
from pydantic import Field

from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, confidence, margin, ms, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import top_traces


class SlowFirstTokenConfig(RuleConfig):
    ttft_ms_warning: float = Field(
        gt=0,
        description="Median time to first token, in ms, from which the first token is slow. Interactive serving "
        "targets well under a second (hosted APIs answer short prompts in 0.2 to 0.8 s); a second is where a "
        "user notices and where an agent's chained calls add up.",
    )
    first_token_call_share_min: float = Field(
        gt=0,
        le=1,
        description="Summed time to first token over the calls' summed time (0..1) from which the wait, not the "
        "streaming, is what makes the calls slow.",
    )
    first_token_share_critical: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of end-to-end latency in llm.first_token (critical path) that makes it critical.",
    )
    min_calls: int = Field(ge=1, description="Calls with a known first token needed to judge. Count.")
    full_confidence_calls: int = Field(
        ge=2, description="Calls at which the sample no longer limits confidence. Count."
    )


class SlowFirstToken(Rule[SlowFirstTokenConfig]):
    """See the module docstring."""

    cause = "slow_first_token"
    config_model = SlowFirstTokenConfig
    latency_share = "first_token_share"
    stage = "llm.first_token"

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        calls = ctx.model_calls.filter(pl.col("in_request") & pl.col("ttft_ns").is_not_null())
        if calls.height < config.min_calls:
            return None
        ttft_p50 = float(calls["ttft_ns"].median())
        call_share = float(calls["ttft_ns"].sum()) / max(float(calls["duration_ns"].sum()), 1.0)
        if ttft_p50 < config.ttft_ms_warning * 1e6 or call_share < config.first_token_call_share_min:
            return None
        first_token_share = ctx.stage_share("llm.first_token")
        severity = "critical" if first_token_share >= config.first_token_share_critical else "warning"
        base = 0.6 + 0.2 * margin(ttft_p50, config.ttft_ms_warning * 1e6, 4 * config.ttft_ms_warning * 1e6)
        base += 0.2 * margin(call_share, config.first_token_call_share_min, 1.0)
        per_token = calls.filter(pl.col("output_tokens") > 1).select(
            pl.col("stream_ns") / (pl.col("output_tokens") - 1)
        )
        slow = calls.filter(pl.col("ttft_ns") >= config.ttft_ms_warning * 1e6)
        model = calls["model"].drop_nulls().mode().sort().first() if calls["model"].drop_nulls().len() else None
        return Finding(
            cause=self.cause,
            title=f"Model calls wait {ms(ttft_p50)} ms for the first token (median, {call_share:.0%} of their time); "
            f"streaming the rest takes {ms(calls['stream_ns'].median())} ms",
            severity=severity,
            confidence=confidence(base, samples=calls.height, full=config.full_confidence_calls),
            evidence={
                "ttft_ms_p50": ms(ttft_p50),
                "ttft_ms_p95": ms(calls["ttft_ns"].quantile(0.95)),
                "stream_ms_p50": ms(calls["stream_ns"].median()),
                "time_per_output_token_ms_p50": ms(per_token.to_series().median()) if per_token.height else None,
                "first_token_call_share": ratio(call_share),
                "first_token_share": ratio(first_token_share),
                "stream_share": ratio(ctx.stage_share("llm.stream")),
                "streamed_call_count": calls.height,
                "slow_call_count": slow.height,
                "llm_call_count": ctx.model_calls.height,
                "model_name": model,
                "example_trace_ids": top_traces(calls, "ttft_ns", EXAMPLE_TRACES),
            },
            remedy="The provider is slow to start answering, not to generate: send fewer uncached prompt tokens "
            "(shorter prompts, a stable prefix the prompt cache serves), use a region, tier or deployment with "
            "less queueing (provisioned throughput, a dedicated endpoint), lower the reasoning effort of reasoning "
            "models, and use a smaller model for latency-critical steps. When the wait varies with load, spread "
            "the calls over time or capacity.",
        )
