"""``orchestration_cpu_hotspot``: a step of the orchestration code (routing, planning, tool selection, output
handling) burns CPU on every request.

Candidates are spans of orchestrating services (those with spans of the ``orchestrator_stages``, e.g. an agent's
``invoke_agent``) in the orchestration stages (``stages``: agent, output_parsing, gateway, other) that are not I/O
and not a wait (``wait_names``): INTERNAL (or unspecified) kind, no HTTP/DB/RPC/messaging attributes, not inside a
step named by another cause (``exclude_under_stages``: decoding inside retrieval is retrieval's cost), and, with
``leaf_only``, without children, so their self time is the step's own work rather than time waiting on something
traced below them. Spans are grouped by (service, name); a group is a hotspot when its median self time per call
reaches ``self_ms_warning``, or its critical-path time reaches ``critical_share_warning`` of end-to-end latency
(many cheap calls add up too). A group found by its median alone must show it by the sign test
(:func:`diagnosis.evidence.median_above`, Bonferroni over the groups found): otherwise it is ``info``. The Codex
CLI's ``instructions.load`` (p50 1.18 ms, 9 of 16 calls over 1 ms, 0.3 % of latency) was a warning before.

On a host whose CPUs are contended (``cpu_contention``) waiting for a CPU lands in self time and can lift a cheap
step over both tests. There the step must also cost ``self_ms_warning`` on its least delayed calls (its p5 self
time: contention only ever adds time, so the fastest calls are the nearest to the step's own cost); one that
passes only the median or the summed test is reported as ``info`` with a discounted confidence
(:mod:`diagnosis.contention`). The p5 rather than a higher quantile because a contended process can delay most
calls of a step: in the instrumented stack beside two spinning processes per CPU, a 0.1 ms validation step had its
p25 at 1-3 ms and its p50 at 3-20 ms in some runs, while its fastest calls stayed at 0.06-0.3 ms; a step that
really costs milliseconds (the per-call schema rebuild, 3 ms) kept its fastest calls at 2.7-7 ms there.
"""

from __future__ import annotations

import polars as pl
from pydantic import Field, model_validator

from analysis.stage_rules import glob_regex
from diagnosis.context import DiagnosisContext
from diagnosis.evidence import capped, joint_confidence, median_above
from diagnosis.findings import EXAMPLE_TRACES, Finding, confidence, ms, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import has_any_attribute, nearest_marked, top_traces
from units import NS_PER_MS


class OrchestrationCpuHotspotConfig(RuleConfig):
    orchestrator_stages: list[str] = Field(
        min_length=1, description="Stages whose presence makes a service an orchestrator (the agent's own work)."
    )
    stages: list[str] = Field(
        min_length=1, description="Stages (analysis.stage_rules.STAGES) where orchestration code runs."
    )
    exclude_under_stages: list[str] = Field(
        description="Spans at or below a span of these stages belong to that step, not to orchestration."
    )
    span_kinds: list[str] = Field(min_length=1, description="Span kinds of in-process work (not I/O).")
    io_attributes: list[str] = Field(
        description="Attributes that mark a span as I/O (an HTTP, database, RPC or messaging call), never CPU."
    )
    wait_names: list[str] = Field(
        description="Span name globs of steps that wait on a decision rather than compute (Claude Code's and Qwen "
        "Code's '*.tool.blocked_on_user': the loop waiting for a permission from a user, a settings rule or a hook); "
        "never CPU.",
    )
    leaf_only: bool = Field(
        description="Only spans without children: a parent's self time in async code is mostly waiting."
    )
    self_ms_warning: float = Field(
        gt=0,
        description="Median self time per call, ms, that makes a step a hotspot (on a contended host the p5 as "
        "well). Routing a request or checking a "
        "few tool arguments takes tens of microseconds; 1 ms is 10-100x that, and in an async service it is 1 ms "
        "for which the event loop serves nobody else, capping the process at 1,000 such steps a second.",
    )
    critical_share_warning: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of end-to-end latency on the critical path that makes the step a hotspot even "
        "when each call is cheap.",
    )
    critical_share_critical: float = Field(
        gt=0, le=1, description="Share (0..1) that makes it critical: the step is a leading stage of the request."
    )
    min_calls: int = Field(ge=1, description="Calls of the step needed to judge. Count.")
    full_confidence_calls: int = Field(
        ge=2, description="Calls at which the sample no longer limits confidence. Count."
    )

    @model_validator(mode="after")
    def _ordered(self) -> OrchestrationCpuHotspotConfig:
        if self.critical_share_critical < self.critical_share_warning:
            raise ValueError("critical_share_critical must be >= critical_share_warning")
        return self


class OrchestrationCpuHotspot(Rule[OrchestrationCpuHotspotConfig]):
    """See the module docstring."""

    cause = "orchestration_cpu_hotspot"
    config_model = OrchestrationCpuHotspotConfig

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        if not ctx.e2e_total_ns:
            return None
        spans = ctx.spans
        orchestrators = spans.filter(pl.col("stage").is_in(config.orchestrator_stages))["service_name"].unique()
        excluded = spans["stage"].is_in(config.exclude_under_stages).to_numpy()
        under_excluded = nearest_marked(ctx.parent, excluded) >= 0
        waits = pl.col("name").str.contains(glob_regex(config.wait_names)) if config.wait_names else pl.lit(False)
        candidates = spans.filter(
            pl.Series(~under_excluded)
            & pl.col("in_request")
            & pl.col("service_name").is_in(orchestrators.implode())
            & pl.col("stage").is_in(config.stages)
            & pl.col("kind").is_in(config.span_kinds)
            & ~has_any_attribute(config.io_attributes)
            & ~waits
            & ((pl.col("child_count") == 0) | (not config.leaf_only))
        )
        threshold_ns = config.self_ms_warning * NS_PER_MS
        groups = (
            candidates.group_by("service_name", "name")
            .agg(
                pl.len().alias("calls"),
                pl.col("self_time_ns").quantile(0.05, "linear").alias("self_p5_ns"),
                pl.col("self_time_ns").quantile(0.25, "linear").alias("self_p25_ns"),
                pl.col("self_time_ns").median().alias("self_p50_ns"),
                pl.col("self_time_ns").quantile(0.95, "linear").alias("self_p95_ns"),
                (pl.col("self_time_ns") >= threshold_ns).mean().alias("over_share"),
                pl.col("critical_path_ns").sum().alias("critical_ns"),
            )
            .with_columns((pl.col("critical_ns") / ctx.e2e_total_ns).alias("critical_share"))
            .filter(
                (pl.col("calls") >= config.min_calls)
                & (
                    (pl.col("self_p50_ns") >= threshold_ns)
                    | (pl.col("critical_share") >= config.critical_share_warning)
                )
            )
            .sort(["critical_share", "self_p50_ns", "service_name", "name"], descending=[True, True, False, False])
        )
        if groups.height == 0:
            return None
        top = groups.row(0, named=True)
        severity = "critical" if top["critical_share"] >= config.critical_share_critical else "warning"
        # Consistency: a step over the threshold on nearly every call is a property of the code, not of one
        # slow moment.
        base = 0.55 + 0.35 * top["over_share"] + 0.1 * (top["critical_share"] >= config.critical_share_warning)
        examples = candidates.filter((pl.col("service_name") == top["service_name"]) & (pl.col("name") == top["name"]))
        found = confidence(base, samples=top["calls"], full=config.full_confidence_calls)
        tests = []
        if top["critical_share"] < config.critical_share_warning:
            # Found by its median alone: a median just over the line, with nearly as many calls under it, is
            # no evidence that the step costs that much.
            tests.append(
                median_above(
                    f"'{top['name']}' costs over {config.self_ms_warning:g} ms of its own time per call",
                    examples["self_time_ns"].to_numpy(),
                    threshold_ns,
                    min_count=config.min_calls,
                    tries=groups.height,
                )
            )
            severity, found = capped(severity, tests), min(found, joint_confidence(tests))
        contention = ctx.contention
        if top["self_p5_ns"] < threshold_ns and contention.detected:
            # Its least delayed calls are cheap: the waits for a CPU may be what lifts it over the line.
            severity, found = "info", contention.discount(found)
        return Finding(
            cause=self.cause,
            title=f"'{top['name']}' in {top['service_name']} spends {ms(top['self_p50_ns'])} ms of its own time per "
            f"call (p50), {top['critical_share']:.1%} of latency",
            severity=severity,
            confidence=found,
            tests=tests,
            evidence={
                "service_name": top["service_name"],
                "span_name": top["name"],
                "call_count": top["calls"],
                "self_ms_p5": ms(top["self_p5_ns"]),
                "self_ms_p25": ms(top["self_p25_ns"]),
                "self_ms_p50": ms(top["self_p50_ns"]),
                "self_ms_p95": ms(top["self_p95_ns"]),
                "over_threshold_share": ratio(top["over_share"]),
                "critical_path_share": ratio(top["critical_share"], 4),
                "cpu_contention_level_ratio": ratio(contention.level),
                "other_hotspot_names": [
                    f"{row['service_name']}: {row['name']}" for row in groups.iter_rows(named=True)
                ][1:5],
                "example_trace_ids": top_traces(examples, "self_time_ns", EXAMPLE_TRACES),
            },
            remedy="Take the per-call work out of the request path: build validators, compiled schemas, templates "
            "and clients once at start-up and reuse them; check only what the step needs (the chosen tool's "
            "arguments, not every tool's); and run unavoidable CPU work in a thread or process pool so it does "
            "not hold the event loop.",
        )
