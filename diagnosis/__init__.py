"""Diagnosis: rules that turn patterns in a window of traces (and vLLM's metrics) into named causes.

Each rule (:mod:`diagnosis.rules`) is a small class with one job behind one interface,
``evaluate(ctx) -> Finding | None``, configured by a validated pydantic model whose defaults live in the
packaged rule table (``diagnosis/rules.yaml``, :mod:`diagnosis.table`). :class:`Diagnoser` runs the enabled
rules on a :class:`DiagnosisContext` (the spans and their analysis, computed once) and ranks the findings by
severity, then the latency they explain, then confidence (:mod:`diagnosis.evidence`: a warning needs its
evidence). :func:`diagnose_window` reads a window from a ``TraceReader`` first and, when a
metrics source is configured (``HOTSPAN_PROMETHEUS_URL``, :mod:`diagnosis.settings`), vLLM's metrics for it.

Imports: :mod:`analysis` and the ``storage`` interfaces; only ``api`` and ``hotspan`` import this package.
"""

from diagnosis.context import DiagnosisContext
from diagnosis.engine import Diagnoser, DiagnosisReport, RuleError, diagnose_spans, diagnose_window
from diagnosis.findings import SEVERITIES, EvidenceTest, Finding, Severity, rank_findings
from diagnosis.metrics import (
    EngineMetrics,
    GaugeSamples,
    MetricsSource,
    PrometheusMetricsSource,
)
from diagnosis.rules import CAUSE_STAGES, CLIENT_SIDE_CAUSES, LATENCY_SHARE_EVIDENCE, RULES
from diagnosis.settings import DiagnosisSettings, load_diagnosis_settings
from diagnosis.table import RuleTable, RuleTableError, default_rule_table, load_rule_table, parse_rule_table

__all__ = [
    "CAUSE_STAGES",
    "CLIENT_SIDE_CAUSES",
    "LATENCY_SHARE_EVIDENCE",
    "RULES",
    "SEVERITIES",
    "Diagnoser",
    "DiagnosisContext",
    "DiagnosisReport",
    "DiagnosisSettings",
    "EngineMetrics",
    "EvidenceTest",
    "Finding",
    "GaugeSamples",
    "MetricsSource",
    "PrometheusMetricsSource",
    "RuleError",
    "RuleTable",
    "RuleTableError",
    "Severity",
    "default_rule_table",
    "diagnose_spans",
    "diagnose_window",
    "load_diagnosis_settings",
    "load_rule_table",
    "parse_rule_table",
    "rank_findings",
]
