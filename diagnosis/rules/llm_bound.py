"""``llm_bound``: requests spend nearly all their time waiting for model calls.

Client-side signal (no engine span or metric needed): the ``llm.*`` stages' share of end-to-end latency on the
critical path, over the requests that made a model call. An untraced call is ``llm.first_token`` then
``llm.stream`` where its span tells the first token (:mod:`analysis.genai`), ``llm.call`` as a whole otherwise;
an engine's spans split a traced call into queue, prefill and decode. The finding says how the time splits
among those, and which model and provider took it (the one with the most call time).

Agent requests normally spend most of their time in model calls (the real instrumentation captures in
``tests/realworld/captures``: 0.55 to 0.84 of each request), so the finding marks the requests where model
calls are nearly everything and the application's own work is not worth optimising. It says where the time is,
not why, so it is ``info``: the specific causes (sequential calls, slow first token, throttling, context
growth, ...) outrank it.
"""

from __future__ import annotations

import polars as pl
from pydantic import Field

from analysis.stage_rules import LLM_STAGES
from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, confidence, margin, ms, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import top_traces

ENGINE_STAGES = ("llm.tokenize", "llm.queue", "llm.prefill", "llm.decode", "llm.detokenize")
"""The phases an engine's own spans show."""


class LlmBoundConfig(RuleConfig):
    llm_share_min: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of end-to-end latency in llm.* stages (critical path, over the requests that "
        "made a model call) from which requests are LLM-bound. Agents normally spend 0.55 to 0.84 of a request "
        "in model calls (the real-instrumentation captures); at 0.9 the rest of the application is a tenth.",
    )
    min_requests: int = Field(ge=1, description="Requests with a model call needed to judge. Count.")
    full_confidence_requests: int = Field(
        ge=2, description="Requests at which the sample no longer limits confidence. Count."
    )


class LlmBound(Rule[LlmBoundConfig]):
    """See the module docstring."""

    cause = "llm_bound"
    config_model = LlmBoundConfig
    latency_share = "llm_share"
    locates_only = True

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        calls = ctx.model_calls.filter(pl.col("in_request"))
        traced = calls["trace_id"].unique().implode()
        requests = ctx.requests.filter(pl.col("trace_id").is_in(traced))
        if requests.height < config.min_requests:
            return None
        e2e = float(requests["duration_ns"].sum())
        per_stage = {stage: float(requests[f"{stage}_ns"].sum()) for stage in LLM_STAGES}
        llm_ns = sum(per_stage.values())
        share = llm_ns / e2e if e2e else 0.0
        if share < config.llm_share_min:
            return None
        per_request = requests.select(
            "trace_id",
            "duration_ns",
            pl.sum_horizontal(f"{stage}_ns" for stage in LLM_STAGES).alias("llm_ns"),
        )
        affected = per_request.filter(pl.col("llm_ns") >= config.llm_share_min * pl.col("duration_ns")).height
        by_model = (
            calls.group_by("model", "provider")
            .agg(pl.col("duration_ns").sum())
            .sort("duration_ns", "model", descending=[True, False], nulls_last=True)
        )
        model, provider = (by_model["model"].first(), by_model["provider"].first())
        first_token = per_stage["llm.first_token"] / llm_ns
        stream = per_stage["llm.stream"] / llm_ns
        whole = per_stage["llm.call"] / llm_ns
        engine = sum(per_stage[stage] for stage in ENGINE_STAGES) / llm_ns
        calls_per_request = calls.group_by("trace_id").len()["len"]
        base = 0.6 + 0.4 * margin(share, config.llm_share_min, 1.0)
        return Finding(
            cause=self.cause,
            title=f"Model calls are {share:.0%} of latency ({model or 'unknown model'}"
            + (f", {provider}" if provider else "")
            + f"): {first_token:.0%} waiting for the first token, {stream:.0%} streaming, {whole:.0%} whole calls"
            + (f", {engine:.0%} engine phases" if engine else ""),
            severity="info",
            confidence=confidence(base, samples=requests.height, full=config.full_confidence_requests),
            evidence={
                "llm_share": ratio(share),
                "first_token_share": ratio(per_stage["llm.first_token"] / e2e),
                "stream_share": ratio(per_stage["llm.stream"] / e2e),
                "whole_call_share": ratio(per_stage["llm.call"] / e2e),
                "engine_share": ratio(sum(per_stage[stage] for stage in ENGINE_STAGES) / e2e),
                "llm_ms_p50": ms(per_request["llm_ns"].median()),
                "e2e_ms_p50": ms(per_request["duration_ns"].median()),
                "llm_call_count": calls.height,
                "calls_per_request_count_p50": calls_per_request.median(),
                "request_count": requests.height,
                "affected_request_count": affected,
                "model_name": model,
                "provider_name": provider,
                "example_trace_ids": top_traces(per_request, "llm_ns", EXAMPLE_TRACES),
            },
            remedy="The model calls are the latency, not the application around them: make fewer calls (merge "
            "steps, skip a round trip the answer does not need), generate fewer tokens (lower max_tokens, terser "
            "output formats), use a faster model or provider tier for the steps that allow it, run independent "
            "calls concurrently, and stream the final answer to the user.",
        )
