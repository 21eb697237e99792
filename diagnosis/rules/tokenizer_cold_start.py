"""``tokenizer_cold_start``: tokenize calls that first have to load the tokenizer.

A *cold* tokenize call is one with a tokenizer-loading span below it (``load_span_names``); where the stack
traces no loading, one that takes ``cold_factor`` times the service's fast calls (its fastest tenth), which
sees reloading as long as a tenth of the calls stay warm. A worker is the service
instance plus the first ``worker_attributes`` value on the tokenize span (a worker index, a thread, a pid).

Loading once per worker is normal (the first request a worker serves pays it: an ``info`` finding with the
cost), and is only reported when the workers' first calls are slow next to their warm ones (``cold_factor``
times the warm calls' median): stray slow calls are not a cold start. The cause is *reloading*: cold calls after
a worker's first call, i.e. tokenizers built per request or workers recycled after a few requests. Severity
follows the share of such calls among those that should have been warm, and the loading time's share of
end-to-end latency.

Loading spans are structure, not timing, so they decide on any host. Slow calls standing in for them are timing:
on a host whose CPUs are contended (``cpu_contention``) calls stretched by waiting for a CPU look cold, so
reloads judged that way stay ``info`` there, with a discounted confidence (:mod:`diagnosis.contention`).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import Field, model_validator

from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, Severity, confidence, margin, ms, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import first_attribute, name_matches, nearest_marked, top_traces


class TokenizerColdStartConfig(RuleConfig):
    tokenize_span_names: list[str] = Field(
        min_length=1, description="Globs (case-insensitive) naming prompt tokenization spans."
    )
    load_span_names: list[str] = Field(
        description="Globs naming tokenizer loading spans (reading tokenizer.json, from_pretrained); a tokenize "
        "span with one below it is cold. Loading spans are never tokenize spans themselves."
    )
    worker_attributes: list[str] = Field(
        description="Attributes telling a process's tokenizer workers apart, in preference order."
    )
    cold_factor: float = Field(
        gt=1,
        description="Without loading spans: a call at least this many times the service's fastest-tenth call "
        "is cold (ratio). Encoding a prompt takes micro- to milliseconds; loading a vocabulary and merges costs "
        "10-1000x that, so 5x separates the two with margin.",
    )
    reload_share_warning: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of calls after a worker's first that are cold, at which the tokenizer is "
        "effectively loaded per request: workers that load once never pass it, recycling or per-request "
        "construction passes it at once.",
    )
    cold_cost_share_critical: float = Field(
        gt=0,
        le=1,
        description="Cold-start time as a share (0..1) of end-to-end latency that makes it critical.",
    )
    min_calls: int = Field(ge=2, description="Tokenize calls needed to judge. Count.")
    full_confidence_calls: int = Field(
        ge=2, description="Calls at which the sample no longer limits confidence. Count."
    )

    @model_validator(mode="after")
    def _disjoint(self) -> TokenizerColdStartConfig:
        if set(self.tokenize_span_names) & set(self.load_span_names):
            raise ValueError("tokenize_span_names and load_span_names must not share a glob")
        return self


class TokenizerColdStart(Rule[TokenizerColdStartConfig]):
    """See the module docstring."""

    cause = "tokenizer_cold_start"
    config_model = TokenizerColdStartConfig

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        spans = ctx.spans
        is_load = spans.select(name_matches(config.load_span_names)).to_series().to_numpy()
        is_tokenize = spans.select(name_matches(config.tokenize_span_names)).to_series().to_numpy() & ~is_load
        if is_tokenize.sum() < config.min_calls:
            return None
        calls = self._calls(ctx, is_tokenize, is_load)
        first = pl.int_range(pl.len()).over("worker") == 0
        calls = calls.sort("start_ns").with_columns(first.alias("first_of_worker"))
        cold = calls.filter("cold")
        if cold.height == 0:
            return None
        later = calls.filter(~pl.col("first_of_worker"))
        reloads = later.filter("cold").height
        reload_share = reloads / later.height if later.height else 0.0
        cost_share = ctx.critical_share(float(cold["cold_critical_ns"].sum()))
        warm = calls.filter(~pl.col("cold"))["duration_ns"]
        warm_ns = warm.median() if warm.len() else None
        first_ns = calls.filter("first_of_worker")["duration_ns"].median()
        workers = calls["worker"].n_unique()
        traced = bool(is_load.any())
        contention = ctx.contention
        evidence = {
            "tokenize_call_count": calls.height,
            "cold_call_count": cold.height,
            "worker_count": workers,
            "reload_share": ratio(reload_share),
            "cold_tokenize_ms_p50": ms(cold["duration_ns"].median()),
            "warm_tokenize_ms_p50": ms(warm_ns),
            "load_ms_p50": ms(cold["load_ns"].median()),
            "cold_start_share": ratio(cost_share),
            "first_tokenize_ms_p50": ms(first_ns),
            "load_span_count": int(is_load.sum()),
            "cpu_contention_level_ratio": ratio(contention.level),
            "example_trace_ids": top_traces(cold, "load_ns", EXAMPLE_TRACES),
        }
        if reload_share < config.reload_share_warning:
            # Once per worker is a cold start only if the first calls stand out from the warm ones.
            if first_ns is None or warm_ns is None or first_ns < config.cold_factor * warm_ns:
                return None
            once = confidence(0.5, samples=cold.height, full=config.full_confidence_calls)
            return Finding(
                cause=self.cause,
                title=f"Each tokenizer worker loads its tokenizer on first use ({cold.height} cold calls, "
                f"{ms(cold['load_ns'].median())} ms each)",
                severity="info",
                confidence=once if traced else contention.discount(once),
                evidence=evidence,
                remedy="Load the tokenizer when a worker starts (warm-up), not on its first request.",
            )
        severity: Severity = "critical" if cost_share >= config.cold_cost_share_critical else "warning"
        base = 0.6 + 0.3 * margin(reload_share, config.reload_share_warning, 1.0) + 0.1 * traced
        found = confidence(base, samples=later.height, full=config.full_confidence_calls)
        verb = "reload"
        if not traced:
            found = contention.discount(found)
            if contention.detected:
                severity, verb = "info", "may reload"
        return Finding(
            cause=self.cause,
            title=f"{reload_share:.0%} of tokenize calls {verb} the tokenizer "
            f"({ms(cold['load_ns'].median())} ms per load)",
            severity=severity,
            confidence=found,
            evidence=evidence,
            remedy="Load the tokenizer once per process or worker and keep it: build it at start-up (or cache it "
            "module-wide), do not construct it per request, and do not recycle tokenizer workers after a few "
            "requests (raise max_requests, or recycle by memory instead).",
        )

    def _calls(self, ctx: DiagnosisContext, is_tokenize: np.ndarray, is_load: np.ndarray) -> pl.DataFrame:
        """Tokenize calls with their worker, whether they were cold, the loading time (load_ns) and its
        critical-path part (cold_critical_ns)."""
        config = self.config
        spans = ctx.spans
        index = np.flatnonzero(is_tokenize)
        load_ns = np.zeros(spans.height)
        load_critical_ns = np.zeros(spans.height)
        if is_load.any():
            # A loading span belongs to the nearest tokenize span above it.
            owner = nearest_marked(ctx.parent, is_tokenize)[is_load]
            durations = spans["duration_ns"].to_numpy()[is_load]
            critical = spans["critical_path_ns"].to_numpy()[is_load]
            owned = owner >= 0
            np.add.at(load_ns, owner[owned], durations[owned])
            np.add.at(load_critical_ns, owner[owned], critical[owned])
        calls = spans[index].select(
            "trace_id",
            "service_name",
            "start_ns",
            "duration_ns",
            "critical_path_ns",
            pl.concat_str(
                "service_name",
                pl.lit("/"),
                "instance",
                pl.lit("/"),
                first_attribute(config.worker_attributes).fill_null(""),
            ).alias("worker"),
            pl.Series("load_ns", load_ns[index]),
            pl.Series("load_critical_ns", load_critical_ns[index]),
        )
        if is_load.any():
            return calls.with_columns(
                (pl.col("load_ns") > 0).alias("cold"), pl.col("load_critical_ns").alias("cold_critical_ns")
            )
        # No loading spans: judge by duration against the service's fast calls (its fastest tenth), which are
        # warm while a tenth of all calls are; once nearly every call reloads, only loading spans can tell.
        typical = pl.col("duration_ns").quantile(0.1, "linear").over("service_name")
        cold = pl.col("duration_ns") >= config.cold_factor * typical
        excess = (pl.col("duration_ns") - typical).clip(lower_bound=0)
        critical = pl.min_horizontal(excess, pl.col("critical_path_ns"))
        return calls.with_columns(cold.alias("cold")).with_columns(
            pl.when("cold").then(excess).otherwise(0).alias("load_ns"),
            pl.when("cold").then(critical).otherwise(0).alias("cold_critical_ns"),
        )
