"""Diagnosis settings. Precedence: explicit argument > environment variable > default.

Environment variables (all optional):

- ``HOTSPAN_PROMETHEUS_URL``: Prometheus base URL holding vLLM's metrics (e.g. ``http://127.0.0.1:9090``);
  unset: diagnosis uses trace evidence only.
- ``HOTSPAN_PROMETHEUS_TIMEOUT_S``: per-query timeout, seconds; default 5.
- ``HOTSPAN_DIAGNOSIS_RULES``: path of a rule table YAML merged over the packaged one (``diagnosis.table``);
  unset: the packaged table.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from diagnosis.metrics import MetricsSource, PrometheusMetricsSource
from diagnosis.table import RuleTable, load_rule_table

ENV_PROMETHEUS_URL = "HOTSPAN_PROMETHEUS_URL"
ENV_PROMETHEUS_TIMEOUT_S = "HOTSPAN_PROMETHEUS_TIMEOUT_S"
ENV_RULES = "HOTSPAN_DIAGNOSIS_RULES"
DEFAULT_PROMETHEUS_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class DiagnosisSettings:
    """What a diagnosis runs with: the rule table and where engine metrics come from (``None``: none)."""

    rules: RuleTable
    metrics: MetricsSource | None


def load_diagnosis_settings(
    *,
    prometheus_url: str | None = None,
    prometheus_timeout_s: float | None = None,
    rules_path: str | Path | None = None,
) -> DiagnosisSettings:
    """Settings from the arguments, then the environment, then defaults.

    Raises:
        diagnosis.table.RuleTableError: the rule table file is unreadable or invalid (every problem listed).
        ValueError: ``HOTSPAN_PROMETHEUS_TIMEOUT_S`` is not a positive number.
    """
    url = prometheus_url or os.environ.get(ENV_PROMETHEUS_URL) or None
    timeout_s = prometheus_timeout_s
    if timeout_s is None:
        text = os.environ.get(ENV_PROMETHEUS_TIMEOUT_S)
        timeout_s = float(text) if text else DEFAULT_PROMETHEUS_TIMEOUT_S
    if timeout_s <= 0:
        raise ValueError(f"{ENV_PROMETHEUS_TIMEOUT_S} must be > 0 seconds, got {timeout_s}")
    path = rules_path or os.environ.get(ENV_RULES) or None
    metrics = PrometheusMetricsSource(url, timeout_s=timeout_s) if url else None
    return DiagnosisSettings(rules=load_rule_table(path), metrics=metrics)
