"""``cpu_contention``: the host's CPUs are contended, so every stage waits for a CPU and slows together.

Not a fault of the traced services but the condition their timings were measured under: a neighbour process,
an oversubscribed node, too many workers for the cores. It is named so the window is read right, and other rules
read its judgement (:mod:`diagnosis.contention`) to discount their timing evidence. Signals, strongest first; the
first one present decides (a direct measurement wins over an inference from the spans):

1. **CPU pressure** (metrics): Linux PSI ``cpu some`` as node_exporter exports it,
   ``node_pressure_cpu_waiting_seconds_total``: the share of the window during which some runnable task waited
   for a CPU, on the most pressured host (:class:`diagnosis.metrics.EngineMetrics`).
2. **CPU utilization** on the spans: ``system.cpu.utilization`` or ``process.cpu.utilization`` (OTel semantic
   conventions' metric names, 0..1) as a span or resource attribute, where an SDK or processor records them;
   the median over the spans carrying one.
3. **Span delays** (traces alone): every operation (service, span name, kind) is compared with its own
   baseline in the same window, the fastest quarter of its calls' self time, i.e. the operation's cost when
   nothing got in its way. A span is *delayed* when its self time exceeds that baseline by ``delay_ms_min`` and
   by ``delay_ratio_min`` times the baseline: the wait for a CPU after every wake-up (an awaited call returning,
   a request arriving) and every preemption of CPU work lands in self time, and on a contended host it is
   milliseconds. Contention is "every stage slowing together": a strict majority of the services judged, and at
   least ``min_services``, each have ``delayed_share_min`` of their spans delayed. A fault slows one operation
   for every call (its baseline moves with it) or one process (an event loop that blocks delays its own spans and
   its caller's), not most services at random. Judged spans: those with children (their self time is the gaps
   between children) and childless in-process work (``leaf_kinds``); childless CLIENT/SERVER spans are remote
   or engine time, which queueing and batching change legitimately.

Severity is always ``info``: contention says how to read the other findings, and its remedy (isolation) lies
outside the traced services. Confidence follows the signal: a pressure metric is a measurement, span delays an
inference.
"""

from __future__ import annotations

import polars as pl
from pydantic import Field, model_validator

from analysis.spans import attribute
from diagnosis.contention import Contention, ContentionSource
from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, EvidenceValue, Finding, confidence, margin, ms, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import top_traces
from units import NS_PER_MS

OPERATION = ("service_name", "name", "kind")


class CpuContentionConfig(RuleConfig):
    cpu_waiting_share_min: float = Field(
        gt=0,
        le=1,
        description="PSI cpu-some share (0..1 of the window) from which the host is contended. A host with spare "
        "cores lets a runnable task wait only briefly (a few % of the time); at a quarter of the time every "
        "request's CPU steps queue behind other work.",
    )
    cpu_waiting_share_full: float = Field(
        gt=0, le=1, description="PSI cpu-some share (0..1) at which contention counts in full (level 1)."
    )
    cpu_utilization_attributes: list[str] = Field(
        description="Span or resource attributes holding CPU utilization (0..1), in preference order."
    )
    cpu_utilization_min: float = Field(
        gt=0,
        le=1,
        description="Median CPU utilization (0..1) from which the host counts as contended: with under a tenth "
        "idle, a task that wakes up usually finds every core busy.",
    )
    leaf_kinds: list[str] = Field(
        description="Kinds of childless spans judged for delays: in-process work, whose self time is CPU time "
        "plus the waits for a CPU."
    )
    min_calls: int = Field(
        ge=4, description="Calls an operation needs before its fastest quarter is a baseline. Count."
    )
    delay_ms_min: float = Field(
        gt=0,
        description="Delay beyond the operation's baseline, ms, from which a span waited: a scheduler time "
        "slice is a few ms, so a wait for a CPU on a busy host is several ms, while an idle core takes a "
        "woken thread within tens of microseconds.",
    )
    delay_ratio_min: float = Field(
        ge=0,
        description="Delay as a multiple of the baseline (ratio) also needed, so that work whose cost simply varies "
        "by a few ms (a long operation) is not counted: at 1.0 the span took at least twice its usual time.",
    )
    delayed_share_min: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of a service's judged spans that are delayed from which the service is slowed. "
        "On an idle host delays of several ms are rare (garbage collection, page faults): a tenth is many.",
    )
    delayed_share_full: float = Field(
        gt=0, le=1, description="Delayed share (0..1) over all judged spans at which contention counts in full."
    )
    min_services: int = Field(
        ge=2, description="Slowed services needed: contention is host-wide, unlike a fault in one service. Count."
    )
    full_confidence_spans: int = Field(
        ge=2, description="Judged spans at which the sample no longer limits the confidence of span delays. Count."
    )

    @model_validator(mode="after")
    def _ordered(self) -> CpuContentionConfig:
        if self.cpu_waiting_share_full < self.cpu_waiting_share_min:
            raise ValueError("cpu_waiting_share_full must be >= cpu_waiting_share_min")
        if self.delayed_share_full < self.delayed_share_min:
            raise ValueError("delayed_share_full must be >= delayed_share_min")
        return self


class CpuContention(Rule[CpuContentionConfig]):
    """See the module docstring. :meth:`judge` is what :class:`diagnosis.Diagnoser` hands the other rules."""

    cause = "cpu_contention"
    config_model = CpuContentionConfig

    def judge(self, ctx: DiagnosisContext) -> Contention:
        """How contended the window's host was (:class:`diagnosis.contention.Contention`)."""
        return self._measure(ctx)[0]

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        contention, value, delays, utilization_spans = self._measure(ctx)
        if not contention.detected:
            return None
        per_service = _per_service(delays)
        slowed = per_service.filter(pl.col("share") >= config.delayed_share_min)["service_name"].to_list()
        delayed = delays.filter("delayed")
        judged_share = delayed.height / delays.height if delays.height else None
        metrics = ctx.metrics
        evidence: dict[str, EvidenceValue] = {
            "signal_source": contention.source,
            "cpu_waiting_share": ratio(metrics.cpu_waiting_share) if metrics else None,
            "host_name": metrics.cpu_waiting_instance if metrics else None,
            "cpu_utilization_share_p50": ratio(value) if contention.source == "cpu_utilization" else None,
            "judged_span_count": delays.height,
            "delayed_span_count": delayed.height,
            "delayed_span_share": ratio(judged_share),
            "span_delay_ms_p50": ms(delayed["delay_ns"].median()) if delayed.height else None,
            "judged_service_count": per_service.height,
            "slowed_service_names": sorted(slowed),
            "example_trace_ids": (
                top_traces(delayed, "delay_ns", EXAMPLE_TRACES)
                or top_traces(ctx.requests, "duration_ns", EXAMPLE_TRACES)
            ),
        }
        lead = margin(value, *self._bounds(contention.source))
        if contention.source == "cpu_pressure":
            title = f"Host CPUs are contended: some task waited for a CPU {value:.0%} of the time"
            found = round(0.6 + 0.4 * lead, 2)  # a measurement of the whole window, not a sample of it
        elif contention.source == "cpu_utilization":
            title = f"Host CPUs are contended: CPU utilization {value:.0%} (median over the spans)"
            found = confidence(0.5 + 0.3 * lead, samples=utilization_spans, full=config.full_confidence_spans)
        else:
            title = (
                f"Every stage slows together: {value:.0%} of spans in {len(slowed)} services waited "
                f">= {config.delay_ms_min:g} ms beyond their operation's usual time (host CPU contention)"
            )
            found = confidence(0.4 + 0.3 * lead, samples=delays.height, full=config.full_confidence_spans)
        return Finding(
            cause=self.cause,
            title=title,
            severity="info",
            confidence=found,
            evidence=evidence,
            remedy="Give the services CPUs of their own: find what else runs on the host (top, pidstat; on "
            "Kubernetes, the node's other pods), set CPU requests and limits or pin with cpusets, move batch work "
            "elsewhere, or add hosts. Until then latencies include waiting for a CPU, and the other findings' "
            "timing evidence is discounted accordingly.",
        )

    def _measure(self, ctx: DiagnosisContext) -> tuple[Contention, float, pl.DataFrame, int]:
        """The judgement, the value it rests on (a share 0..1), the judged spans' delays, and how many spans
        carry a CPU utilization attribute."""
        config = self.config
        delays = self._delays(ctx)
        utilization = self._utilization(ctx)
        metrics = ctx.metrics
        source: ContentionSource
        if metrics is not None and metrics.cpu_waiting_share is not None:
            source, value = "cpu_pressure", metrics.cpu_waiting_share
        elif utilization.len():
            source, value = "cpu_utilization", float(utilization.median() or 0.0)
        else:
            value = float(delays["delayed"].mean() or 0.0) if delays.height else 0.0
            per_service = _per_service(delays)
            slowed = int((per_service["share"] >= config.delayed_share_min).sum())
            majority = slowed >= config.min_services and 2 * slowed > per_service.height
            source = "span_delays" if majority else "none"
        low, full = self._bounds(source)
        level = 0.5 + 0.5 * margin(value, low, full) if source != "none" and value >= low else 0.0
        return Contention(level, source if level else "none"), value, delays, utilization.len()

    def _bounds(self, source: ContentionSource) -> tuple[float, float]:
        """The threshold and the "full" value of the signal ``source`` rests on."""
        config = self.config
        if source == "cpu_pressure":
            return config.cpu_waiting_share_min, config.cpu_waiting_share_full
        if source == "cpu_utilization":
            return config.cpu_utilization_min, 1.0
        return config.delayed_share_min, config.delayed_share_full

    def _delays(self, ctx: DiagnosisContext) -> pl.DataFrame:
        """Per judged span: trace_id, service_name, delay_ns (self time beyond its operation's fastest quarter)
        and delayed (Boolean)."""
        config = self.config
        judged = ctx.spans.filter(
            pl.col("in_request") & ((pl.col("child_count") > 0) | pl.col("kind").is_in(config.leaf_kinds))
        ).with_columns(
            pl.len().over(OPERATION).alias("calls"),
            pl.col("self_time_ns").quantile(0.25, "lower").over(OPERATION).alias("baseline_ns"),
        )
        delay = pl.col("self_time_ns") - pl.col("baseline_ns")
        floor = pl.max_horizontal(
            pl.lit(config.delay_ms_min * NS_PER_MS), config.delay_ratio_min * pl.col("baseline_ns")
        )
        return judged.filter(pl.col("calls") >= config.min_calls).select(
            "trace_id", "service_name", delay.alias("delay_ns"), (delay >= floor).alias("delayed")
        )

    def _utilization(self, ctx: DiagnosisContext) -> pl.Series:
        """The CPU utilization (0..1) each span carries, on itself or its resource; spans without one left out."""
        keys = self.config.cpu_utilization_attributes
        frame = ctx.analysis.tree.spans
        columns = ["attributes"] + (["resource_attributes"] if "resource_attributes" in frame.columns else [])
        sources = [attribute(key, column) for column in columns for key in keys]
        if not sources:
            return pl.Series("utilization", [], dtype=pl.Float64)
        values = frame.select(pl.coalesce(*sources).cast(pl.Float64, strict=False).alias("utilization"))
        usable = values.to_series().drop_nulls().drop_nans()
        return usable.filter(usable.is_between(0.0, 1.0))


def _per_service(delays: pl.DataFrame) -> pl.DataFrame:
    """Delayed share (0..1) per service of the judged spans. Columns: service_name, share."""
    return delays.group_by("service_name").agg(pl.col("delayed").mean().alias("share"))
