"""Running the rules over a window: the rule engine, and reading a window from storage for it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from analysis.stage_rules import StageRules
from diagnosis.context import DiagnosisContext
from diagnosis.findings import Finding, rank_findings
from diagnosis.metrics import EngineMetrics, MetricsSource
from diagnosis.rules.base import Rule
from diagnosis.rules.cpu_contention import CpuContention
from diagnosis.table import RuleTable, default_rule_table
from storage.prometheus import PrometheusError
from storage.reader import TraceQuery, TraceReader

log = logging.getLogger(__name__)

DEFAULT_TRACE_LIMIT = 2_000
"""Traces a window diagnosis reads by default (the most recently active first)."""


@dataclass(frozen=True)
class RuleError:
    """A rule that raised; the other rules' findings still stand."""

    cause: str
    message: str


@dataclass(frozen=True)
class DiagnosisReport:
    """Findings of one diagnosis, ordered by severity, then the latency they explain, then confidence
    (:func:`diagnosis.findings.rank_findings`).

    Attributes:
        findings: the ranked findings.
        trace_count: requests (traces) analysed.
        metrics: ``"none"`` (no metrics source), ``"prometheus"`` (read), or ``"unavailable: <reason>"``.
        errors: rules that failed, with the reason.
    """

    findings: list[Finding]
    trace_count: int
    metrics: str = "none"
    errors: list[RuleError] = field(default_factory=list)


class Diagnoser:
    """Evaluates every enabled rule of a table on a :class:`DiagnosisContext`. Stateless between calls."""

    def __init__(self, table: RuleTable | None = None) -> None:
        self.rules: list[Rule[Any]] = (table or default_rule_table()).build()

    def diagnose(self, ctx: DiagnosisContext, metrics_status: str = "none") -> DiagnosisReport:
        """Ranked findings for ``ctx``. First the ``cpu_contention`` rule (when enabled) judges the host and its
        judgement goes on ``ctx.contention`` for the others to read. A rule that raises is logged and reported in
        ``errors``; the others still run, so one rule's bug on odd data never hides the rest."""
        findings: list[Finding] = []
        errors: list[RuleError] = []
        failed: set[str] = set()
        for rule in self.rules:
            if isinstance(rule, CpuContention):
                try:
                    ctx.contention = rule.judge(ctx)
                except Exception as error:
                    log.exception("host contention judgement failed; the rules run without it")
                    errors.append(RuleError(rule.cause, f"{type(error).__name__}: {error}"))
                    failed.add(rule.cause)
        for rule in self.rules:
            if rule.cause in failed:
                continue
            try:
                finding = rule.evaluate(ctx)
            except Exception as error:
                log.exception("diagnosis rule %s failed", rule.cause)
                errors.append(RuleError(rule.cause, f"{type(error).__name__}: {error}"))
                continue
            if finding is not None:
                findings.append(_with_latency_share(rule, finding))
        trace_count = ctx.requests.height
        locating = {rule.cause for rule in self.rules if rule.locates_only}
        corroborating = {rule.cause for rule in self.rules if rule.tests_corroborate}
        ranked = rank_findings(findings, locating, corroborating)
        return DiagnosisReport(ranked, trace_count, metrics_status, errors)


def _with_latency_share(rule: Rule[Any], finding: Finding) -> Finding:
    """``finding`` with ``latency_share`` read from its evidence key :attr:`Rule.latency_share` (the one place
    a rule says which of its figures is its share of latency), unless the rule set it itself."""
    share = finding.evidence.get(rule.latency_share) if rule.latency_share else None
    if finding.latency_share is not None or not isinstance(share, int | float):
        return finding
    return finding.model_copy(update={"latency_share": min(1.0, max(0.0, float(share)))})


def diagnose_spans(
    spans: pl.DataFrame,
    *,
    table: RuleTable | None = None,
    metrics: EngineMetrics | None = None,
    stage_rules: StageRules | None = None,
) -> DiagnosisReport:
    """Diagnose a span frame directly (whole traces; contract in :mod:`analysis.spans`)."""
    ctx = DiagnosisContext(spans, metrics, stage_rules=stage_rules)
    return Diagnoser(table).diagnose(ctx, "none" if metrics is None else "prometheus")


def diagnose_window(
    reader: TraceReader,
    *,
    tenant: str | None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    service: str | None = None,
    operation: str | None = None,
    limit: int = DEFAULT_TRACE_LIMIT,
    diagnoser: Diagnoser | None = None,
    metrics_source: MetricsSource | None = None,
    stage_rules: StageRules | None = None,
) -> DiagnosisReport:
    """Read a window's traces and diagnose them. Blocking (storage and metrics I/O).

    Args:
        reader: the trace store.
        tenant: whose traces are read (``storage.tenancy``); ``None`` reads every tenant (admin only). Engine
            metrics are infrastructure-wide and not split by tenant.
        start_ns, end_ns: window on span start, ns since the Unix epoch; ``None`` leaves a side open.
        service: only traces with a span of this service (the whole trace is analysed).
        operation: only traces with a span of this name (of ``service`` when both are given).
        limit: most traces read, the most recently active first.
        diagnoser: the rules; default the packaged table.
        metrics_source: engine metrics for the window; ``None``: trace evidence only. When it fails, the
            diagnosis goes on without metrics and says so in ``DiagnosisReport.metrics``.
        stage_rules: the stage table the spans are analysed with (the one the pipeline and the Stages views
            use); default the packaged one.
    """
    query = TraceQuery(service=service, operation=operation, start_ns=start_ns, end_ns=end_ns, limit=limit)
    spans = reader.search_spans(query, tenant=tenant)
    metrics, status = None, "none"
    if metrics_source is not None and spans.height:
        window_start = start_ns if start_ns is not None else int(spans["start_time_unix_nano"].min())
        window_end = end_ns if end_ns is not None else int(spans["end_time_unix_nano"].max())
        try:
            metrics, status = metrics_source.engine_metrics(window_start, window_end), "prometheus"
        except PrometheusError as error:
            log.warning("engine metrics unavailable, diagnosing from traces only: %s", error)
            status = f"unavailable: {error}"
    ctx = DiagnosisContext(spans, metrics, stage_rules=stage_rules)
    return (diagnoser or Diagnoser()).diagnose(ctx, status)
