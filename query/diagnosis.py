"""A window's named causes, diagnosed one way for every reader: the API, the Diagnosis page and the alerts use
the same rule table, the same stage rules as the pipeline and the Stages views, and the same engine metrics."""

from __future__ import annotations

import polars as pl

from analysis import build_tree
from analysis.stage_rules import StageRules
from diagnosis import Diagnoser, DiagnosisReport, DiagnosisSettings, diagnose_window
from diagnosis.engine import DEFAULT_TRACE_LIMIT
from diagnosis.rules.admission_tier_starvation import (
    AdmissionTierStarvation,
    AdmissionTierStarvationConfig,
    tier_settings,
)
from diagnosis.rules.base import RuleConfig
from diagnosis.rules.oversized_payload import OversizedPayload, OversizedPayloadConfig
from diagnosis.table import default_rule_table
from diagnosis.tiers import TierSettings, tier_stats, tiered_requests
from storage.reader import TraceQuery, TraceReader


class DiagnosisService:
    """Diagnoses windows of one store with one configuration. Stateless between calls, so thread-safe.

    Args:
        reader: where the window's traces are read.
        settings: the rule table and the engine-metrics source (``hotspan.settings``).
        stage_rules: the stage table the spans are analysed with (the pipeline's).

    Attributes:
        size_keys: the span attributes the ``oversized_payload`` rule reads a body's size from (bytes), by which
            the anomaly scorer tells a minute of larger bodies (:meth:`query.anomaly.AnomalyScorer.moved`).
    """

    def __init__(self, reader: TraceReader, settings: DiagnosisSettings, stage_rules: StageRules) -> None:
        self.reader = reader
        self.settings = settings
        self.stage_rules = stage_rules
        self._diagnoser = Diagnoser(settings.rules)
        self._tiers = _tier_settings(settings)
        self.size_keys = _size_keys(settings)

    @property
    def metrics_configured(self) -> bool:
        """Whether engine metrics are read as evidence."""
        return self.settings.metrics is not None

    def diagnose(
        self,
        *,
        tenant: str | None,
        start_ns: int | None = None,
        end_ns: int | None = None,
        service: str | None = None,
        operation: str | None = None,
        limit: int = DEFAULT_TRACE_LIMIT,
    ) -> DiagnosisReport:
        """The findings over the window (``diagnosis.diagnose_window``: traces with a span starting in
        ``[start_ns, end_ns]``, ns since the epoch, open where None; with a span of ``service`` and of
        ``operation`` when given; the ``limit`` most recently active). Blocking (storage and metrics I/O)."""
        return diagnose_window(
            self.reader,
            tenant=tenant,
            start_ns=start_ns,
            end_ns=end_ns,
            service=service,
            operation=operation,
            limit=limit,
            diagnoser=self._diagnoser,
            metrics_source=self.settings.metrics,
            stage_rules=self.stage_rules,
        )

    def tiers(self, window: TraceQuery, *, tenant: str | None) -> pl.DataFrame:
        """Latency and drops per admission tier of the requests ``window`` finds (as :meth:`diagnose` reads a
        window: ``service``, ``start_ns``/``end_ns`` on span start, the ``limit`` most recently active traces),
        told apart as ``admission_tier_starvation`` tells them (:mod:`diagnosis.tiers`).

        Columns (:func:`diagnosis.tiers.tier_stats` by entry service): service_name, tier, rank, request_count,
        dropped_count, dropped_share (0..1), latency_ms_p50, latency_ms_p95 (ms); no rows when no request has a
        tier. Blocking (storage I/O)."""
        spans = self.reader.search_spans(window, tenant=tenant)
        return tier_stats(tiered_requests(build_tree(spans), self._tiers), ("service_name",))


def _tier_settings(settings: DiagnosisSettings) -> TierSettings:
    """The configured rule's tier settings; the packaged ones when the table holds no such rule."""
    config = _rule_config(settings, AdmissionTierStarvation.cause)
    assert isinstance(config, AdmissionTierStarvationConfig)
    return tier_settings(config)


def _size_keys(settings: DiagnosisSettings) -> tuple[str, ...]:
    """The configured ``oversized_payload`` rule's body-size attributes, requests' then responses'."""
    config = _rule_config(settings, OversizedPayload.cause)
    assert isinstance(config, OversizedPayloadConfig)
    return (*config.request_size_keys, *config.response_size_keys)


def _rule_config(settings: DiagnosisSettings, cause: str) -> RuleConfig:
    """The configured table's config of ``cause``; the packaged table's when the configured one holds no such rule."""
    tables = (settings.rules, default_rule_table())
    return next(table.config(cause) for table in tables if cause in {s.cause for s in table.settings})
