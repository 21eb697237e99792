"""A window's named causes, diagnosed one way for every reader: the API, the Diagnosis page and the alerts use
the same rule table, the same stage rules as the pipeline and the Stages views, and the same engine metrics."""

from __future__ import annotations

from analysis.stage_rules import StageRules
from diagnosis import Diagnoser, DiagnosisReport, DiagnosisSettings, diagnose_window
from diagnosis.engine import DEFAULT_TRACE_LIMIT
from storage.reader import TraceReader


class DiagnosisService:
    """Diagnoses windows of one store with one configuration. Stateless between calls, so thread-safe.

    Args:
        reader: where the window's traces are read.
        settings: the rule table and the engine-metrics source (``hotspan.settings``).
        stage_rules: the stage table the spans are analysed with (the pipeline's).
    """

    def __init__(self, reader: TraceReader, settings: DiagnosisSettings, stage_rules: StageRules) -> None:
        self.reader = reader
        self.settings = settings
        self.stage_rules = stage_rules
        self._diagnoser = Diagnoser(settings.rules)

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
        limit: int = DEFAULT_TRACE_LIMIT,
    ) -> DiagnosisReport:
        """The findings over the window (``diagnosis.diagnose_window``: traces with a span starting in
        ``[start_ns, end_ns]``, ns since the epoch, open where None; of ``service`` when given; the ``limit`` most
        recently active). Blocking (storage and metrics I/O)."""
        return diagnose_window(
            self.reader,
            tenant=tenant,
            start_ns=start_ns,
            end_ns=end_ns,
            service=service,
            limit=limit,
            diagnoser=self._diagnoser,
            metrics_source=self.settings.metrics,
            stage_rules=self.stage_rules,
        )
