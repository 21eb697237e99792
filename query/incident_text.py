"""Incidents in words, the same in an alert, the API's consumers and the Incidents page: a metric's value with its
unit, a deviating series, an incident's one-line summary. Pure."""

from __future__ import annotations

from typing import Any

from query.anomaly import FINDING_KIND, SEVERITY_LEVELS
from storage.incident_store import Incident

UNITS = {"p95_ms": "ms", "error_rate": "", "throughput_per_min": "/min"}
"""Unit shown after a value of each metric (the error rate is shown as a percentage)."""


def metric_value(metric: str, value: float) -> str:
    """A metric's value with its unit: ``412 ms``, ``7.5 %``, ``18 /min``; a severity by name: ``warning``."""
    if metric == "error_rate":
        return f"{value:.1%}"
    if metric == "severity":
        return SEVERITY_LEVELS[round(value)]
    return f"{value:.4g} {UNITS.get(metric, '')}".rstrip()


def series_text(series: dict[str, Any]) -> str:
    """One deviating series in words: ``vllm llm_request p95_ms 324 ms (baseline 31.2 ms, z 94)``; a finding
    ``gateway finding oversized_payload critical (baseline none)``."""
    if series["kind"] == FINDING_KIND:
        return (
            f"{series['service']} finding {series['name']} {metric_value('severity', series['observed'])}"
            f" (baseline {metric_value('severity', series['baseline'])})"
        )
    return (
        f"{series['service']} {series['name']} {series['metric']} {metric_value(series['metric'], series['observed'])}"
        f" (baseline {metric_value(series['metric'], series['baseline'])}, z {series['score']:.3g})"
    )


def incident_summary(incident: Incident) -> str:
    """One line naming the primary series, its window's value against the baseline, and how many series moved."""
    what = incident.kind if incident.kind in ("stage", FINDING_KIND) else "operation"
    others = len(incident.series) - 1
    return (
        f"{incident.service} {what} {incident.name}: {incident.metric} "
        f"{metric_value(incident.metric, incident.observed_value)} against a baseline of "
        f"{metric_value(incident.metric, incident.baseline_value)}"
        + (f" (+{others} more series)" if others > 0 else "")
    )
