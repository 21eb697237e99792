"""What a diagnosis runs with: the rule table and where engine metrics come from.

Built from Hotspan's settings (``hotspan.settings``: ``HOTSPAN_DIAGNOSIS_RULES``, ``HOTSPAN_PROMETHEUS_URL``,
``HOTSPAN_PROMETHEUS_TIMEOUT_S``), the one place environment variables are read, or directly in tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from diagnosis.metrics import DEFAULT_PROMETHEUS_TIMEOUT_S, MetricsSource, PrometheusMetricsSource
from diagnosis.table import RuleTable, load_rule_table


@dataclass(frozen=True)
class DiagnosisSettings:
    """What a diagnosis runs with: the rule table and where engine metrics come from (``None``: none)."""

    rules: RuleTable
    metrics: MetricsSource | None


def load_diagnosis_settings(
    *,
    prometheus_url: str | None = None,
    prometheus_timeout_s: float = DEFAULT_PROMETHEUS_TIMEOUT_S,
    rules_path: str | Path | None = None,
) -> DiagnosisSettings:
    """The rule table (the packaged one merged with ``rules_path``'s, when given) and a Prometheus metrics source
    at ``prometheus_url`` (none without a URL) asked with ``prometheus_timeout_s`` (seconds, > 0) per query.

    Raises:
        diagnosis.table.RuleTableError: the rule table file is unreadable or invalid (every problem listed).
        ValueError: the timeout is not positive.
    """
    if prometheus_timeout_s <= 0:
        raise ValueError(f"prometheus_timeout_s must be > 0 seconds, got {prometheus_timeout_s}")
    metrics = PrometheusMetricsSource(prometheus_url, timeout_s=prometheus_timeout_s) if prometheus_url else None
    return DiagnosisSettings(rules=load_rule_table(rules_path), metrics=metrics)
