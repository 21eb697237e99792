"""The capacity health score as every reader gets it: the REST API (``GET /api/v1/capacity``), the Services page and
Hotspan's ``/metrics`` (``hotspan.capacity_metrics``) all ask :class:`CapacityService`, so they show the same
scores, and the same status when there is no Prometheus to read (:mod:`diagnosis.capacity` computes them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from diagnosis.capacity import CapacityScore, CapacitySettings, capacity_scores
from diagnosis.metrics import PrometheusMetricsSource
from storage.prometheus import PrometheusError

CapacityStatus = Literal["ok", "not_configured", "unavailable"]
"""``ok``: the engines' metrics were read (possibly holding no engine); ``not_configured``: no
``HOTSPAN_PROMETHEUS_URL``; ``unavailable``: Prometheus could not be queried."""
NOT_CONFIGURED = (
    "HOTSPAN_PROMETHEUS_URL is not set: point it at a Prometheus that scrapes the vLLM engines to score their capacity"
    " (make demo starts one scraping its stack's engine when the prometheus binary is installed: make system-deps)."
)


@dataclass(frozen=True)
class CapacityReport:
    """The scores of one window and how they were read.

    Attributes:
        status: see :data:`CapacityStatus`.
        message: why there are no scores, for people (empty when ``status`` is ``ok``).
        start_ns: window start, ns since the Unix epoch (``end_ns`` minus the score's window).
        end_ns: window end, ns since the Unix epoch.
        settings: the SLO, saturation, sized rate, window and weights the parts were measured against.
        scores: engines first, then services, each sorted by name (:func:`diagnosis.capacity.capacity_scores`);
            empty unless ``status`` is ``ok``.
    """

    status: CapacityStatus
    message: str
    start_ns: int
    end_ns: int
    settings: CapacitySettings
    scores: list[CapacityScore] = field(default_factory=list)

    def of_scope(self, scope: str) -> list[CapacityScore]:
        """The scores of ``scope`` (``engine`` or ``service``), in report order."""
        return [score for score in self.scores if score.scope == scope]


class CapacityService:
    """Capacity scores over one Prometheus. Thread-safe (holds no state of its own); blocking.

    Args:
        source: the Prometheus scraping the engines; None where none is configured.
        settings: what the parts are measured against.
    """

    def __init__(self, source: PrometheusMetricsSource | None, settings: CapacitySettings | None = None) -> None:
        self._source = source
        self.settings = settings or CapacitySettings()

    @property
    def configured(self) -> bool:
        """Whether a Prometheus is configured."""
        return self._source is not None

    def report(self, end_ns: int) -> CapacityReport:
        """The scores over the ``settings.window_s`` before ``end_ns`` (ns since the Unix epoch). Never raises for
        Prometheus's sake: a missing or failing one is the report's ``status`` and ``message``."""
        start_ns = end_ns - round(self.settings.window_s * 1e9)
        if self._source is None:
            return CapacityReport("not_configured", NOT_CONFIGURED, start_ns, end_ns, self.settings)
        try:
            scores = capacity_scores(self._source, end_ns, self.settings)
        except PrometheusError as error:
            message = f"Engine metrics unavailable: {error}"
            return CapacityReport("unavailable", message, start_ns, end_ns, self.settings)
        return CapacityReport("ok", "", start_ns, end_ns, self.settings, scores)
