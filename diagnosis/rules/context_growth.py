"""``context_growth``: each model call of a request re-sends a context that keeps growing, while the answers do not.

Client-side signal (token counts of the model calls; no engine span or metric needed). Per request with at least
``min_calls`` calls that report input and output tokens, in call order:

- the input never shrinks from one call to the next, and the last call's input is ``growth_ratio_warning``
  times the first's or more (the context at least doubled within the request);
- the output stays flat: its least-squares slope over the calls is at most ``output_growth_share_max`` of the
  input's (the growth is re-sent context, not longer answers being fed back).

An agent loop appends each answer and tool result to its history, so its input grows by a few hundred tokens a
call on top of its prompt (the real-instrumentation captures: x1.2 over three calls); a context that doubles
re-sends whole earlier transcripts, documents or tool results each call. Evidence: the input's slope in tokens
per call, the growth ratio, the output's slope, and ``resent_input_share``: the share of the requests' input
tokens an earlier call of the same request had already sent (a lower bound from the counts, which cannot show
what repeats inside one call).
"""

from __future__ import annotations

import polars as pl
from pydantic import Field, model_validator

from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, confidence, margin, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import top_traces


class ContextGrowthConfig(RuleConfig):
    min_calls: int = Field(
        ge=3, description="Model calls with input and output tokens a request needs for a trend. Count."
    )
    growth_ratio_warning: float = Field(
        gt=1,
        description="Last call's input tokens over the first's (ratio) from which the context grows: at 2 it "
        "doubled within one request, far beyond the answers and tool results an agent loop appends.",
    )
    growth_ratio_critical: float = Field(
        gt=1,
        description="Last over first input tokens (ratio; median over the affected requests) that makes it "
        "critical: at 4 the later calls send several copies of what the first one needed.",
    )
    output_growth_share_max: float = Field(
        ge=0,
        le=1,
        description="Output tokens' slope over the calls as a share (0..1) of the input tokens' slope, at or below "
        "which the output is flat (the context does not grow because the answers do).",
    )
    affected_share_min: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of the requests with enough calls that must show the growth: below a tenth it is "
        "an occasional long conversation, not the application's habit.",
    )
    min_requests: int = Field(ge=1, description="Requests with enough calls needed to judge. Count.")
    full_confidence_requests: int = Field(
        ge=2, description="Affected requests at which the sample no longer limits confidence. Count."
    )

    @model_validator(mode="after")
    def _ordered(self) -> ContextGrowthConfig:
        if self.growth_ratio_critical < self.growth_ratio_warning:
            raise ValueError("growth_ratio_critical must be >= growth_ratio_warning")
        return self


class ContextGrowth(Rule[ContextGrowthConfig]):
    """See the module docstring."""

    cause = "context_growth"
    config_model = ContextGrowthConfig

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        trends = self._trends(ctx)
        if trends.height < config.min_requests:
            return None
        affected = trends.filter(
            pl.col("monotone")
            & (pl.col("growth_ratio") >= config.growth_ratio_warning)
            & (pl.col("input_slope") > 0)
            & (pl.col("output_slope") <= config.output_growth_share_max * pl.col("input_slope"))
        )
        affected_share = affected.height / trends.height
        if affected.height == 0 or affected_share < config.affected_share_min:
            return None
        growth = float(affected["growth_ratio"].median())
        severity = "critical" if growth >= config.growth_ratio_critical else "warning"
        resent = float(affected["resent_tokens"].sum()) / float(affected["input_total"].sum())
        base = 0.6 + 0.2 * margin(growth, config.growth_ratio_warning, config.growth_ratio_critical)
        base += 0.2 * margin(affected_share, config.affected_share_min, 1.0)
        slope = affected["input_slope"].median()
        return Finding(
            cause=self.cause,
            title=f"Model calls re-send a growing context in {affected_share:.0%} of requests: input grows "
            f"x{growth:.1f} over a request (+{slope:.0f} tokens a call) while the output stays flat",
            severity=severity,
            confidence=confidence(base, samples=affected.height, full=config.full_confidence_requests),
            evidence={
                "request_count": trends.height,
                "affected_request_count": affected.height,
                "affected_request_share": ratio(affected_share),
                "calls_per_request_count_p50": affected["calls"].median(),
                "first_input_tokens_p50": affected["first_input"].median(),
                "last_input_tokens_p50": affected["last_input"].median(),
                "input_growth_ratio_p50": ratio(growth, 2),
                "input_growth_tokens_p50": ratio(slope, 1),
                "output_tokens_p50": affected["output_mean"].median(),
                "output_growth_tokens_p50": ratio(affected["output_slope"].median(), 1),
                "resent_input_share": ratio(resent),
                "input_tokens_total": int(affected["input_total"].sum()),
                "example_trace_ids": top_traces(affected, "input_total", EXAMPLE_TRACES),
            },
            remedy="Send each call what its step needs instead of the whole transcript again: keep one history and "
            "append only new turns (never re-append earlier messages), trim or summarize old turns and large tool "
            "results, drop retrieved documents once used; with a stateful API (OpenAI Responses' "
            "previous_response_id, a conversation id) do not re-send history at all; keep the stable part first so a "
            "prompt cache serves it.",
        )

    def _trends(self, ctx: DiagnosisContext) -> pl.DataFrame:
        """Per request with ``min_calls`` calls reporting input and output tokens: calls, first_input,
        last_input, growth_ratio, monotone (input never shrinks), input_slope and output_slope (tokens per call,
        least squares), output_mean, input_total and resent_tokens (per call, the smaller of its input and the
        previous call's, summed)."""
        known = ctx.model_calls.filter(
            pl.col("in_request") & pl.col("input_tokens").is_not_null() & pl.col("output_tokens").is_not_null()
        ).with_columns(pl.int_range(pl.len()).over("trace_id").cast(pl.Float64).alias("k"))
        step = pl.col("input_tokens").cast(pl.Float64)
        previous = pl.col("input_tokens").shift(1)
        return (
            known.group_by("trace_id")
            .agg(
                pl.len().alias("calls"),
                pl.col("input_tokens").first().alias("first_input"),
                pl.col("input_tokens").last().alias("last_input"),
                (pl.col("input_tokens").diff().drop_nulls() >= 0).all().alias("monotone"),
                (pl.cov("k", step) / pl.col("k").var()).alias("input_slope"),
                (pl.cov("k", pl.col("output_tokens").cast(pl.Float64)) / pl.col("k").var()).alias("output_slope"),
                pl.col("output_tokens").mean().alias("output_mean"),
                pl.col("input_tokens").sum().alias("input_total"),
                pl.when(previous.is_not_null())
                .then(pl.min_horizontal(pl.col("input_tokens"), previous))
                .sum()
                .alias("resent_tokens"),
            )
            .filter((pl.col("calls") >= self.config.min_calls) & (pl.col("first_input") > 0))
            .with_columns((pl.col("last_input") / pl.col("first_input")).alias("growth_ratio"))
        )
