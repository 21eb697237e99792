"""``queue_saturation``: requests wait in vLLM's scheduler queue for a batch slot or KV blocks.

Trace signal: the ``llm.queue`` stage (vLLM's ``gen_ai.latency.time_in_queue``, split out of ``llm_request``
by :mod:`analysis.vllm`) as a share of end-to-end latency on the critical path. Corroboration: a call's queue
time grows with the number of requests already in flight on its engine when it arrived (rank correlation),
and, with metrics, ``vllm:num_requests_waiting`` above zero for most of the window.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import Field, model_validator

from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, confidence, margin, ms, ratio, severity_for
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import in_flight, rank_correlation, top_traces


class QueueSaturationConfig(RuleConfig):
    queue_share_warning: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of end-to-end latency spent in llm.queue that makes a warning. vLLM admits a "
        "request at the next step (milliseconds) while it has batch slots and KV blocks; when a tenth of all "
        "request time is queueing, the engine is full most of the time, not in a passing burst.",
    )
    queue_share_critical: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) that makes it critical: at a quarter, queueing is among the largest stages, "
        "on the order of decode itself.",
    )
    min_calls: int = Field(
        ge=1, description="Engine calls (llm_request spans) needed before judging; fewer are anecdotes. Count."
    )
    full_confidence_calls: int = Field(
        ge=2, description="Engine calls at which the sample no longer limits confidence. Count."
    )
    concurrency_correlation_min: float = Field(
        ge=-1,
        le=1,
        description="Rank correlation (-1..1) between a call's queue time and the requests in flight on its engine "
        "at arrival above which queueing counts as growing with concurrency (0.3: a moderate, visible trend).",
    )
    waiting_sustained_share: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of metric samples with vllm:num_requests_waiting > 0 that counts as sustained "
        "queueing: above half the window, the queue is the normal state, not a spike.",
    )
    kv_full_share: float = Field(
        gt=0,
        le=1,
        description="vllm:kv_cache_usage_perc (0..1) at or above which the KV cache, not max_num_seqs, is the "
        "limit: vLLM keeps some blocks free for running sequences, so 0.9 is effectively full.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> QueueSaturationConfig:
        if self.queue_share_critical < self.queue_share_warning:
            raise ValueError("queue_share_critical must be >= queue_share_warning")
        return self


class QueueSaturation(Rule[QueueSaturationConfig]):
    """See the module docstring."""

    cause = "queue_saturation"
    config_model = QueueSaturationConfig
    latency_share = "queue_share"
    stage = "llm.queue"

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        calls = ctx.llm_calls.filter(pl.col("queue_ns").is_not_null())
        if calls.height < config.min_calls:
            return None
        share = ctx.stage_share("llm.queue")
        waiting = ctx.metrics.num_requests_waiting if ctx.metrics else None
        sustained = waiting is not None and waiting.share_above(0) >= config.waiting_sustained_share
        severity = severity_for(share, config.queue_share_warning, config.queue_share_critical)
        if severity is None and not sustained:
            return None
        arrivals = _in_flight_at_arrival(calls)
        correlation = rank_correlation(calls["queue_ns"].to_numpy(), arrivals)
        grows = correlation is not None and correlation >= config.concurrency_correlation_min
        kv = ctx.metrics.kv_cache_usage if ctx.metrics else None
        kv_full = kv is not None and kv.max >= config.kv_full_share
        base = 0.6 + 0.2 * margin(share, config.queue_share_warning, config.queue_share_critical)
        base += 0.1 * grows + 0.1 * sustained
        if severity is None:
            # Metrics alone: the engine queued, but the sampled traces barely show it.
            severity, base = "warning", 0.5
        queue = calls["queue_ns"]
        remedy = (
            "Add KV cache capacity (more GPU memory per replica, a smaller max_model_len, or more replicas); "
            "raising max_num_seqs will not help while the cache is full."
            if kv_full
            else "Raise vLLM's --max-num-seqs (and --max-num-batched-tokens) while vllm:kv_cache_usage_perc has "
            "headroom; otherwise add engine replicas. Shed or defer low-priority traffic at the gateway before it "
            "queues in the engine."
        )
        requests = ctx.requests.select("trace_id", pl.col("llm.queue_ns").alias("weight"))
        return Finding(
            cause=self.cause,
            title=f"Requests spend {share:.0%} of their latency waiting in vLLM's scheduler queue"
            + (" with the KV cache full" if kv_full else ""),
            severity=severity,
            confidence=confidence(base, samples=calls.height, full=config.full_confidence_calls),
            evidence={
                "queue_share": ratio(share),
                "queue_ms_p50": ms(queue.median()),
                "queue_ms_p95": ms(queue.quantile(0.95, "linear")),
                "queue_ms_max": ms(queue.max()),
                "llm_call_count": calls.height,
                "in_flight_at_arrival_count_p50": float(np.median(arrivals)),
                "queue_vs_in_flight_correlation": ratio(correlation),
                "waiting_nonzero_share": ratio(waiting.share_above(0)) if waiting else None,
                "waiting_requests_count_mean": ratio(waiting.mean) if waiting else None,
                "kv_cache_usage_max_share": ratio(kv.max) if kv else None,
                "metrics_source": ctx.metrics.source if ctx.metrics else None,
                "example_trace_ids": top_traces(requests, "weight", EXAMPLE_TRACES),
            },
            remedy=remedy,
        )


def _in_flight_at_arrival(calls: pl.DataFrame) -> np.ndarray:
    """Per call, the other calls in flight on the same engine when it arrived."""
    counts = np.zeros(calls.height)
    start = calls["start_time_unix_nano"].to_numpy()
    end = start + calls["duration_ns"].to_numpy()
    engines = calls["engine"].to_numpy()
    for engine in np.unique(engines):
        on = engines == engine
        # in_flight counts the arriving call itself; the engine had the others.
        counts[on] = in_flight(start[on], end[on], start[on]) - 1
    return counts
