"""``sequential_llm_calls``: a request makes model calls one after another that do not depend on each other.

Client-side signal (model calls, token counts and, where captured, their content; no engine span or metric
needed). Within a request, a model call B *could have run concurrently* with the call A before it when all of
these hold:

- B starts after A ended (they ran one after another);
- B does not carry A's answer. Where both were captured with content capture on, A's output does not appear in
  B's input (:func:`diagnosis.call_content.output_probe`). Otherwise by the counts: B's input differs from A's
  by less than ``continuation_output_share`` of A's output tokens. A chat API call that follows another
  re-sends the history plus the answer, so its input grows by at least the answer; a step that sends on only the
  answer (summarize, translate) has an input of another size; independent calls of one kind (the same template
  on different questions) have inputs of about the same size. Independent calls of different sizes are
  therefore missed without content, never the other way round;
- no step that could feed B started between them (a span of ``feeding_stages``, tool or retrieval, starting after
  A ended and before B started: its result, built from A's answer, may be in B's prompt);
- B is not A again (same model and input token count: a repeat, which ``redundant_llm_calls`` names) and A did
  not fail (B would be a retry).

Consecutive such calls form a group; run concurrently, a group would take its longest call instead of its
span from the first start to the last end. The difference, summed per request, is the time the serial
schedule costs. Calls without token counts cannot be judged and end a group.
"""

from __future__ import annotations

import polars as pl
from pydantic import Field, model_validator

from diagnosis.call_content import input_content, output_probe
from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, confidence, margin, ms, ratio, severity_for
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import top_traces, with_previous_call


class SequentialLlmCallsConfig(RuleConfig):
    continuation_output_share: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of the previous call's output tokens: without captured content, a call whose "
        "input differs from the previous call's by this much or more may carry that answer. A re-sent answer costs "
        "about its own token count (chat templates add a few tokens, tool-call formats drop a few); half of it "
        "leaves room for both.",
    )
    feeding_stages: list[str] = Field(
        description="Stages of spans whose result may feed the next model call (tool, retrieval): one starting "
        "between two calls makes the second depend on the first."
    )
    saved_share_warning: float = Field(
        gt=0,
        le=1,
        description="Time a concurrent schedule would save, as a share (0..1) of end-to-end latency, that makes "
        "a warning: a tenth of every request's latency is worth a code change.",
    )
    saved_share_critical: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) that makes it critical: at 0.3 the serial schedule is a large part of latency.",
    )
    affected_share_min: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of requests with two or more model calls that must show such a group: below a "
        "tenth it is an occasional path, not the agent's shape.",
    )
    min_requests: int = Field(ge=1, description="Requests with two or more model calls needed to judge. Count.")
    full_confidence_requests: int = Field(
        ge=2, description="Affected requests at which the sample no longer limits confidence. Count."
    )

    @model_validator(mode="after")
    def _ordered(self) -> SequentialLlmCallsConfig:
        if self.saved_share_critical < self.saved_share_warning:
            raise ValueError("saved_share_critical must be >= saved_share_warning")
        return self


class SequentialLlmCalls(Rule[SequentialLlmCallsConfig]):
    """See the module docstring."""

    cause = "sequential_llm_calls"
    config_model = SequentialLlmCallsConfig

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        calls = with_previous_call(
            ctx.model_calls.filter(pl.col("in_request")).with_columns(input_content(), output_probe())
        ).with_columns(pl.col("output_probe").shift(1).over("trace_id").alias("previous_output_probe"))
        multi = calls.filter(pl.col("position") > 0)["trace_id"].unique()
        if multi.len() < config.min_requests:
            return None
        fed = self._fed(ctx, calls)
        grown = pl.col("input_tokens") - pl.col("previous_input_tokens")
        same_size = grown.abs() < config.continuation_output_share * pl.col("previous_output_tokens")
        quoted = pl.col("input_content").str.contains(pl.col("previous_output_probe"), literal=True)
        answer_not_sent = (
            pl.when(pl.col("input_content").is_not_null() & pl.col("previous_output_probe").is_not_null())
            .then(~quoted)
            .otherwise(same_size)
        )
        independent = (
            (pl.col("start_ns") >= pl.col("previous_end_ns"))
            & answer_not_sent
            & (
                (pl.col("input_tokens") != pl.col("previous_input_tokens"))
                | (pl.col("model") != pl.col("previous_model"))
            )
            & (pl.col("previous_status_code") != "Error")
            & ~pl.col("index").is_in(fed.implode())
        ).fill_null(False)
        grouped = calls.with_columns(independent.alias("independent")).with_columns(
            (~pl.col("independent")).cum_sum().over("trace_id").alias("group")
        )
        groups = (
            grouped.group_by("trace_id", "group")
            .agg(
                pl.len().alias("calls"),
                (pl.col("end_ns").max() - pl.col("start_ns").min()).alias("serial_ns"),
                pl.col("duration_ns").max().alias("concurrent_ns"),
            )
            .filter(pl.col("calls") >= 2)
        )
        if groups.height == 0:
            return None
        per_request = groups.group_by("trace_id").agg(
            pl.col("calls").sum(),
            pl.col("serial_ns").sum(),
            pl.col("concurrent_ns").sum(),
            (pl.col("serial_ns") - pl.col("concurrent_ns")).sum().alias("saved_ns"),
        )
        affected_share = per_request.height / multi.len()
        saved_share = ctx.critical_share(float(per_request["saved_ns"].sum()))
        severity = severity_for(saved_share, config.saved_share_warning, config.saved_share_critical)
        if severity is None or affected_share < config.affected_share_min:
            return None
        base = 0.6 + 0.2 * margin(saved_share, config.saved_share_warning, config.saved_share_critical)
        base += 0.2 * margin(affected_share, config.affected_share_min, 1.0)
        saved_ms = ms(per_request["saved_ns"].median())
        return Finding(
            cause=self.cause,
            title=f"{affected_share:.0%} of requests make independent model calls one after another; run "
            f"concurrently they would save {saved_ms} ms per request ({saved_share:.0%} of latency)",
            severity=severity,
            confidence=confidence(base, samples=per_request.height, full=config.full_confidence_requests),
            evidence={
                "llm_call_count": calls.height,
                "calls_per_request_count_p50": calls.group_by("trace_id").len()["len"].median(),
                "independent_call_count": int(per_request["calls"].sum()),
                "group_calls_count_max": int(groups["calls"].max()),
                "request_count": multi.len(),
                "affected_request_count": per_request.height,
                "affected_request_share": ratio(affected_share),
                "serial_ms_p50": ms(per_request["serial_ns"].median()),
                "concurrent_ms_p50": ms(per_request["concurrent_ns"].median()),
                "saved_ms_p50": saved_ms,
                "saved_share": ratio(saved_share),
                "example_trace_ids": top_traces(per_request, "saved_ns", EXAMPLE_TRACES),
            },
            remedy="Issue model calls that do not need each other's answers at the same time (asyncio.gather, a "
            "thread pool, a framework's parallel branches or fan-out node) and join their answers; keep calls "
            "serial only where one's output is the next one's input.",
        )

    def _fed(self, ctx: DiagnosisContext, calls: pl.DataFrame) -> pl.Series:
        """Indices of the calls before which a feeding step (tool, retrieval) started after the previous call
        of the same request ended."""
        steps = ctx.spans.filter(pl.col("stage").is_in(self.config.feeding_stages)).select(
            "trace_id", pl.col("start_ns").alias("step_ns")
        )
        gaps = calls.filter(pl.col("previous_end_ns").is_not_null()).select(
            "trace_id", "index", "previous_end_ns", "start_ns"
        )
        between = gaps.join(steps, on="trace_id").filter(
            (pl.col("step_ns") >= pl.col("previous_end_ns")) & (pl.col("step_ns") < pl.col("start_ns"))
        )
        return between["index"].unique()
