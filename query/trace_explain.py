"""Why one request was slow: its stages along the critical path, the sections of that path, and the diagnosis of the
requests around it, each finding related to this request.

The diagnosis rules judge windows, not single requests (a queue that saturates, a cache that is never hit, a
tokenizer that loads on every call show only against other requests), so a request's findings are those of its
*neighbourhood*: the requests with a span of its root service starting within ``margin_ns`` of it
(:meth:`query.diagnosis.DiagnosisService.diagnose`, the same rules, stage table and engine metrics as the REST
API and the Diagnosis page). Each finding says how much of this request's critical path sits in the stage its cause
acts in (:data:`diagnosis.CAUSE_STAGES`) and whether the rule named this request among its examples.

Times are ns since the Unix epoch, durations ns.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from diagnosis import CAUSE_STAGES, DiagnosisReport, Finding
from query.analysis_service import TraceStages, critical_path_of, trace_stages_of
from query.diagnosis import DiagnosisService
from query.trace_model import TraceView
from query.trace_view_cache import TraceViews
from units import NS_PER_MIN

DEFAULT_MARGIN_NS = 5 * NS_PER_MIN
"""How far before the request's first span and after its last the neighbourhood reaches, ns."""
DEFAULT_NEIGHBOURS = 500
"""Most requests of the neighbourhood diagnosed (the most recently active first): a busy hour holds thousands, and
an explanation should answer in seconds."""


@dataclass(frozen=True)
class TracedFinding:
    """A neighbourhood finding as it bears on the explained request.

    Attributes:
        finding: the finding, as the window's diagnosis ranks it.
        stage: the stage its cause acts in (:data:`diagnosis.CAUSE_STAGES`); None for a cause without one.
        trace_stage_ns: ns of the request's critical path in that stage (0 without a stage).
        example: the rule named this request among its ``example_trace_ids``.
    """

    finding: Finding
    stage: str | None
    trace_stage_ns: int
    example: bool


@dataclass(frozen=True)
class Neighbourhood:
    """The requests diagnosed around the explained one: those with a span of ``service`` starting in
    ``[start_ns, end_ns]``, at most ``limit`` of them (the most recently active first)."""

    service: str
    start_ns: int
    end_ns: int
    limit: int


@dataclass(frozen=True)
class TraceExplanation:
    """One request explained.

    Attributes:
        view: the trace as the trace page shows it (:class:`query.trace_model.TraceView`; its first spans only
            when the store holds more than one read may take, :attr:`TraceView.truncated`).
        stages: where the request's time went, both attributions (:func:`query.analysis_service.trace_stages_of`).
        critical_path: the root's critical path (:func:`query.analysis_service.critical_path_of` columns), in time
            order.
        neighbourhood: what was diagnosed.
        report: the neighbourhood's diagnosis.
        findings: its findings in rank order, each related to this request.
    """

    view: TraceView
    stages: TraceStages
    critical_path: pl.DataFrame
    neighbourhood: Neighbourhood
    report: DiagnosisReport
    findings: list[TracedFinding]

    @property
    def top_stage(self) -> str | None:
        """The stage with the most critical-path time; None for a request of no duration."""
        stage, ns = max(self.stages.stages_ns.items(), key=lambda item: item[1])
        return stage if ns > 0 else None


def explain_trace(
    views: TraceViews,
    diagnosis: DiagnosisService,
    trace_id: str,
    *,
    tenant: str | None,
    margin_ns: int = DEFAULT_MARGIN_NS,
    limit: int = DEFAULT_NEIGHBOURS,
) -> TraceExplanation | None:
    """Explain ``trace_id`` (canonical 32 hex) for ``tenant`` (module docstring); None when the tenant has no span
    of it. Blocking: the trace's read (``views.load``, the kept view when unchanged) and the neighbourhood's.

    Raises:
        storage.clickhouse.StorageError: a read failed (``ReadLimitError`` when it passed its budget).
    """
    view = views.load(trace_id, tenant=tenant)
    if view is None:
        return None
    stages = trace_stages_of(view.analysis)
    service = str(view.spans["service_name"][view.primary_root] or "")
    around = Neighbourhood(service, max(0, view.start_ns - margin_ns), view.end_ns + margin_ns, limit)
    report = diagnosis.diagnose(
        tenant=tenant,
        start_ns=around.start_ns,
        end_ns=around.end_ns,
        service=service or None,
        limit=limit,
    )
    findings = [_traced(finding, stages, trace_id) for finding in report.findings]
    return TraceExplanation(view, stages, critical_path_of(view.analysis), around, report, findings)


def _traced(finding: Finding, stages: TraceStages, trace_id: str) -> TracedFinding:
    stage = CAUSE_STAGES.get(finding.cause)
    examples = finding.evidence.get("example_trace_ids")
    return TracedFinding(
        finding=finding,
        stage=stage,
        trace_stage_ns=stages.stages_ns.get(stage, 0) if stage else 0,
        example=isinstance(examples, list) and trace_id in examples,
    )
