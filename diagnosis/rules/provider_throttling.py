"""``provider_throttling``: the model provider refuses calls (429, 5xx) and the client waits and retries.

Client-side signal: the HTTP requests that carried each model call
(:attr:`~diagnosis.context.DiagnosisContext.model_call_attempts`; the OpenAI SDK, like most, retries 429 and
5xx answers inside one call, after ``Retry-After``), or the model call span itself where no HTTP span lies under
it (a framework that retries by making a new call). An attempt is *throttled* when its HTTP status (OTel
semconv ``http.response.status_code``, the older ``http.status_code``, or a numeric ``error.type``) is one of
``statuses``. The time a throttled call lost runs from its first throttled attempt to the start of the next
attempt that was not throttled (the waiting and the refused attempts), or to the call's end when none followed
(the call failed). ``Retry-After`` is read where the instrumentation captured the response header
(``http.response.header.retry-after``, seconds, or ``retry-after-ms``).
"""

from __future__ import annotations

import polars as pl
from pydantic import Field

from analysis.spans import attribute
from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, confidence, margin, ms, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import http_status, top_traces

RETRY_AFTER_S = "http.response.header.retry-after"
RETRY_AFTER_MS = "http.response.header.retry-after-ms"
_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"


class ProviderThrottlingConfig(RuleConfig):
    statuses: list[int] = Field(
        min_length=1,
        description="HTTP statuses of a refused attempt: 429 (rate limited), 500/502/503/504 (provider errors and "
        "overload), 529 (Anthropic's overloaded).",
    )
    min_throttled_attempts: int = Field(
        ge=1, description="Throttled attempts in the window needed to report (one can be a blip). Count."
    )
    lost_share_critical: float = Field(
        gt=0,
        le=1,
        description="Time lost to refused attempts and waiting as a share (0..1) of end-to-end latency that makes "
        "it critical.",
    )
    full_confidence_attempts: int = Field(
        ge=2, description="Throttled attempts at which the sample no longer limits confidence. Count."
    )


class ProviderThrottling(Rule[ProviderThrottlingConfig]):
    """See the module docstring."""

    cause = "provider_throttling"
    config_model = ProviderThrottlingConfig

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        attempts = self._attempts(ctx).with_columns(
            pl.col("http_status").is_in(config.statuses).fill_null(False).alias("throttled")
        )
        throttled_attempts = int(attempts["throttled"].sum())
        if throttled_attempts < config.min_throttled_attempts:
            return None
        calls = ctx.model_calls.filter(pl.col("in_request"))
        lost = self._lost(attempts, calls)
        lost_share = ctx.critical_share(float(lost["lost_ns"].sum()))
        severity = "critical" if lost_share >= config.lost_share_critical else "warning"
        base = 0.8 + 0.2 * margin(lost_share, 0.0, config.lost_share_critical)
        statuses = attempts.filter("throttled")["http_status"].unique().sort().cast(pl.String).to_list()
        retry_after = attempts.filter("throttled")["retry_after_s"].drop_nulls()
        throttled_calls = lost.height
        lost_ms = ms(float(lost["lost_ns"].sum()))
        return Finding(
            cause=self.cause,
            title=f"The model provider refused {throttled_attempts} attempts ({', '.join(statuses)}) of "
            f"{throttled_calls} calls; waiting and retrying cost {lost_ms} ms ({lost_share:.0%} of latency)",
            severity=severity,
            confidence=confidence(base, samples=throttled_attempts, full=config.full_confidence_attempts),
            evidence={
                "llm_call_count": calls.height,
                "throttled_call_count": throttled_calls,
                "throttled_attempt_count": throttled_attempts,
                "retry_count": int(lost["retries"].sum()),
                "failed_call_count": int(lost["failed"].sum()),
                "attempts_per_call_count_max": int(lost["attempts"].max()),
                "http_status_names": statuses,
                "lost_ms_total": lost_ms,
                "lost_ms_p50": ms(lost["lost_ns"].median()),
                "lost_share": ratio(lost_share),
                "retry_after_s_p50": ratio(retry_after.median()) if retry_after.len() else None,
                "example_trace_ids": top_traces(lost, "lost_ns", EXAMPLE_TRACES),
            },
            remedy="Stay under the provider's limits instead of being refused: raise the rate limit (usage tier, "
            "quota, provisioned throughput) or spread calls over keys, deployments or regions; cap concurrency "
            "client-side below the limit (a token bucket on requests and tokens per minute); honour Retry-After "
            "with jittered exponential back-off; fall back to another deployment or model when the provider is "
            "overloaded (503, 529); send fewer tokens per call, as limits count tokens too.",
        )

    @staticmethod
    def _attempts(ctx: DiagnosisContext) -> pl.DataFrame:
        """Every attempt of the requests' model calls: the HTTP spans that carried a call, else the call span
        itself. Columns: trace_id, call_index, start_ns, http_status, retry_after_s."""
        calls = ctx.model_calls.filter(pl.col("in_request"))
        carried = ctx.model_call_attempts.filter(pl.col("call_index").is_in(calls["index"].implode()))
        alone = calls.filter(~pl.col("index").is_in(carried["call_index"].implode())).with_columns(
            pl.col("index").alias("call_index")
        )
        retry_after = pl.coalesce(
            attribute(RETRY_AFTER_MS).str.extract(_NUMBER).cast(pl.Float64) / 1e3,
            attribute(RETRY_AFTER_S).str.extract(_NUMBER).cast(pl.Float64),
        )
        columns = ("trace_id", "call_index", "start_ns")
        return pl.concat(
            [
                carried.select(*columns, "http_status", retry_after.alias("retry_after_s")),
                alone.select(*columns, http_status().alias("http_status"), retry_after.alias("retry_after_s")),
            ]
        ).sort("call_index", "start_ns")

    @staticmethod
    def _lost(attempts: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
        """Per call with a throttled attempt: trace_id, attempts, retries (attempts after the first), failed
        (no attempt after its last throttled one was served), lost_ns (module docstring)."""
        ends = calls.select(pl.col("index").alias("call_index"), pl.col("end_ns").alias("call_end_ns"))
        first = pl.col("start_ns").filter("throttled").min()
        last = pl.col("start_ns").filter("throttled").max()
        recovered = pl.col("start_ns").filter(~pl.col("throttled") & (pl.col("start_ns") > last)).min()
        return (
            attempts.group_by("trace_id", "call_index")
            .agg(
                pl.len().alias("attempts"),
                pl.col("throttled").any().alias("hit"),
                first.alias("first_ns"),
                recovered.alias("recovered_ns"),
            )
            .filter("hit")
            .join(ends, on="call_index", how="left")
            .with_columns(
                (pl.col("attempts") - 1).alias("retries"),
                pl.col("recovered_ns").is_null().alias("failed"),
                (pl.coalesce("recovered_ns", "call_end_ns") - pl.col("first_ns")).alias("lost_ns"),
            )
        )
