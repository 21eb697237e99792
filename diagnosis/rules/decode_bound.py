"""``decode_bound``: token generation dominates latency, and each token gets slower as batches grow.

Trace signal: the ``llm.decode`` stage (vLLM's ``time_in_model_decode``) as a share of end-to-end latency on
the critical path. Per engine call, TPOT (decode time per output token after the first, vLLM's definition) is
set against the decoding batch: the time-averaged number of calls decoding on the same engine during the
call's decode phase. TPOT *grows with batch* when calls decoding in the largest batches (top third) have a
median TPOT at least ``tpot_growth_ratio`` times that of the smallest (bottom third) and the Mann-Whitney U test
says the top third's TPOTs are larger (:mod:`diagnosis.evidence`: ``growth_min_calls`` / 3 calls per side,
one-sided at 0.01); the rank correlation of TPOT with batch is shown beside it.

Generation being the largest part of latency is the normal state of LLM serving, so decode leading alone is
``info`` (the lever is output length). The cause is the conjunction: decode leads *and* TPOT grows with batch,
i.e. the engine batches more sequences than per-token latency allows: a ``warning``, ``critical`` when decode
is nearly all of latency.

On a host whose CPUs are contended (``cpu_contention``) every stage slows together, and most in the busiest
periods, which are also the largest batches: TPOT then "grows with batch" without the batch being the cause.
There the growth is reported as evidence but adds neither severity (the finding stays ``info``) nor confidence.
Decode's share of latency is what it is on any host, so the finding that decode leads is kept as it is.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
from pydantic import Field, model_validator

from analysis import STAGES
from diagnosis.context import DiagnosisContext
from diagnosis.evidence import joint_confidence, larger_values
from diagnosis.findings import EXAMPLE_TRACES, EvidenceTest, Finding, Severity, confidence, margin, ms, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import mean_concurrency, rank_correlation, top_traces

FINISH_REASONS = "gen_ai.response.finish_reasons"


class DecodeBoundConfig(RuleConfig):
    decode_share_min: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of end-to-end latency in llm.decode from which decode, when it is also the "
        "largest stage, is reported (info without TPOT growth): at 0.4 it is a large part of every request, and "
        "the largest stage is where shortening pays most.",
    )
    decode_share_critical: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) that, with TPOT growing with batch, makes it critical: generation is nearly all "
        "of the latency and batching makes each token slower.",
    )
    tpot_growth_ratio: float = Field(
        gt=1,
        description="Median TPOT of calls in the largest decoding batches (top third) over the smallest (bottom "
        "third), at or above which TPOT grows with batch (ratio). A decode step reads the weights once (fixed) "
        "plus each sequence's KV cache; at 1.3 the per-sequence part is a visible share of every step.",
    )
    growth_min_calls: int = Field(
        ge=6,
        description="Calls needed before TPOT growth is judged (a third of them on each side). Count. With a few "
        "calls per third, step-to-step jitter alone moves the medians by 2x.",
    )
    batch_spread_min: float = Field(
        gt=1,
        description="Mean decoding batch of the top third over the bottom third (ratio) needed to judge growth: "
        "over a narrow batch range any trend is noise.",
    )
    batch_min_count: float = Field(
        gt=1,
        description="Mean decoding batch of the top third needed to blame the batch for TPOT growth. Count. Below "
        "it a decode step is mostly its fixed cost (reading the weights: about 6 ms against 0.25 ms per sequence "
        "on an 8B model), so what slows a token in the larger batches is other requests' prefill sharing the "
        "steps, not the batch size: on the stack's clean default workload, batches of 1-4 showed TPOT 1.7x.",
    )
    min_calls: int = Field(ge=3, description="Engine calls with two or more output tokens needed to judge. Count.")
    full_confidence_calls: int = Field(
        ge=2, description="Calls at which the sample no longer limits confidence. Count."
    )

    @model_validator(mode="after")
    def _ordered(self) -> DecodeBoundConfig:
        if self.decode_share_critical < self.decode_share_min:
            raise ValueError("decode_share_critical must be >= decode_share_min")
        return self


class DecodeBound(Rule[DecodeBoundConfig]):
    """See the module docstring."""

    cause = "decode_bound"
    config_model = DecodeBoundConfig
    latency_share = "decode_share"
    stage = "llm.decode"
    tests_corroborate = True

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        calls = ctx.llm_calls.filter(pl.col("tpot_ns").is_not_null() & pl.col("first_token_ns").is_not_null())
        if calls.height < config.min_calls:
            return None
        share = ctx.stage_share("llm.decode")
        if share < config.decode_share_min or share < max(ctx.stage_share(stage) for stage in STAGES):
            return None
        batch = _decoding_batch(calls)
        tpot = calls["tpot_ns"].to_numpy()
        test = _growth_test(batch, tpot, config) if calls.height >= config.growth_min_calls else None
        growth = None if test is None else test.effect_ratio
        correlation = rank_correlation(batch, tpot)
        grows = test is not None and test.significant
        contention = ctx.contention
        corroborated = grows and not contention.detected
        severity = _severity(share, corroborated, config)
        capped = _length_share(calls)
        base = 0.5 + 0.3 * margin(share, config.decode_share_min, config.decode_share_critical) + 0.2 * corroborated
        tpot_ms = ms(float(np.median(tpot)))
        title = f"Decode is {share:.0%} of latency (TPOT {tpot_ms} ms" + (
            f", {growth:.1f}x slower in large batches" if grows and growth is not None else ""
        )
        title += "; host CPUs contended)" if contention.detected else ")"
        remedy = (
            "Cap max_tokens at what answers need (finish_reason=length shows calls hitting the cap), ask for "
            "shorter outputs and stream them to the user."
        )
        if corroborated:
            remedy += (
                " TPOT grows with the decoding batch: lower vLLM's --max-num-seqs to trade throughput for "
                "per-token latency, or add replicas / tensor parallelism; speculative decoding helps at small "
                "batch sizes."
            )
        elif grows:
            remedy += (
                " TPOT also grows with the decoding batch, but the host's CPUs are contended (cpu_contention), "
                "which slows the busiest periods of every stage: judge the growth again without the contention "
                "before lowering vLLM's --max-num-seqs."
            )
        requests = ctx.requests.select("trace_id", pl.col("llm.decode_ns").alias("weight"))
        return Finding(
            cause=self.cause,
            title=title,
            severity=severity,
            confidence=joint_confidence([test])
            if corroborated and test is not None
            else confidence(base, samples=calls.height, full=config.full_confidence_calls),
            tests=[] if test is None else [test],
            evidence={
                "decode_share": ratio(share),
                "decode_ms_p50": ms(calls["decode_ns"].median()),
                "tpot_ms_p50": tpot_ms,
                "tpot_ms_p95": ms(float(np.quantile(tpot, 0.95))),
                "output_tokens_p50": calls["completion_tokens"].median(),
                "length_capped_share": ratio(capped),
                "decoding_batch_count_p50": ratio(float(np.median(batch)), 2),
                "decoding_batch_count_max": ratio(float(np.max(batch)), 2),
                "tpot_growth_ratio": ratio(growth),
                "tpot_vs_batch_correlation": ratio(correlation),
                "llm_call_count": calls.height,
                "cpu_contention_level_ratio": ratio(contention.level),
                "example_trace_ids": top_traces(requests, "weight", EXAMPLE_TRACES),
            },
            remedy=remedy,
        )


def _severity(share: float, grows: bool, config: DecodeBoundConfig) -> Severity:
    """``info`` when decode only leads; with TPOT growing with batch (on an uncontended host) a ``warning``,
    ``critical`` from ``decode_share_critical``."""
    if not grows:
        return "info"
    return "critical" if share >= config.decode_share_critical else "warning"


def _decoding_batch(calls: pl.DataFrame) -> np.ndarray:
    """Per call, the mean number of calls decoding on its engine during its own decode phase (itself included)."""
    batch = np.ones(calls.height)
    lo = calls["first_token_ns"].to_numpy()
    hi = calls["last_token_ns"].to_numpy()
    engines = calls["engine"].to_numpy()
    for engine in np.unique(engines):
        on = engines == engine
        batch[on] = mean_concurrency(lo[on], hi[on], lo[on], hi[on])
    return batch


def _growth_test(batch: np.ndarray, tpot: np.ndarray, config: DecodeBoundConfig) -> EvidenceTest | None:
    """Whether TPOT is larger in the top third of calls by batch than in the bottom third (effect: the ratio of
    their medians); ``None`` when the top third's mean batch is under ``batch_spread_min`` times the bottom
    third's or under ``batch_min_count``, since nothing can then be said about growth with the batch."""
    order = np.argsort(batch, kind="stable")
    third = max(1, order.size // 3)
    low, high = order[:third], order[-third:]
    top = batch[high].mean()
    if top < batch[low].mean() * config.batch_spread_min or top < config.batch_min_count:
        return None
    return larger_values(
        "TPOT of calls in the largest decoding batches (top third) > in the smallest (bottom third)",
        tpot[low],
        tpot[high],
        min_count=config.growth_min_calls // 3,
        min_effect_ratio=config.tpot_growth_ratio,
    )


def _length_share(calls: pl.DataFrame) -> float | None:
    """Share of calls that stopped at max_tokens (finish reason ``length``); ``None`` when none report one."""
    reasons = calls.select(pl.col("attributes").map.get(FINISH_REASONS)).to_series().drop_nulls().to_list()
    if not reasons:
        return None
    return sum("length" in _reasons(text) for text in reasons) / len(reasons)


def _reasons(text: str) -> list[str]:
    # vLLM v1 writes a JSON array as a string; SDKs that record string arrays store them the same way.
    try:
        value = json.loads(text)
    except ValueError:
        return [text]
    return [str(item) for item in value] if isinstance(value, list) else [str(value)]
