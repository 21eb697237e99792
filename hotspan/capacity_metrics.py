"""The capacity health score on Hotspan's ``/metrics`` (:mod:`diagnosis.capacity`), read from Prometheus at scrape.

Families (labels ``scope`` = ``engine`` or ``service``, ``name`` = the engine or service, ``service``):

- ``hotspan_capacity_score``: 0-100 (absent where no part could be computed);
- ``hotspan_capacity_part{part=kv_cache|queue|ttft|rate}``: each headroom, 0..1;
- ``hotspan_capacity_input{input=kv_cache_usage|requests_waiting|requests_running|request_rate_per_s|
  ttft_p95_seconds}``: what the parts were computed from;
- ``hotspan_capacity_up``: 1 when the last read of the engines' metrics succeeded, else 0.

The scores are computed at most once per ``cache_s`` (scrapes in between get the same values), so a Prometheus
scraping Hotspan every 15 s costs the engines' Prometheus five range queries per period. ``alerts/capacity.rules.yml``
is an example alerting rule over them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import fields

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from diagnosis.capacity import CapacityScore, CapacitySettings, capacity_scores
from diagnosis.metrics import PrometheusMetricsSource
from storage.prometheus import PrometheusError

log = logging.getLogger(__name__)

LABELS = ("scope", "name", "service")


class CapacityCollector(Collector):
    """A prometheus_client collector of the capacity scores (module docstring). Thread-safe.

    Args:
        source: the engines' Prometheus.
        settings: SLO, saturation, sized rate and window of the score.
        cache_s: seconds a computation serves scrapes.
        clock: seconds since the epoch (tests pass their own).
    """

    def __init__(
        self,
        source: PrometheusMetricsSource,
        settings: CapacitySettings,
        cache_s: float = 15.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._source = source
        self._settings = settings
        self._cache_s = cache_s
        self._clock = clock
        self._lock = threading.Lock()
        self._computed_at = -float("inf")
        self._scores: list[CapacityScore] = []
        self._up = False

    def describe(self) -> Iterator[Metric]:
        """The families without samples: registering the collector reads nothing."""
        return iter(_families())

    def collect(self) -> Iterator[Metric]:
        """The families with the current (or cached) scores."""
        scores, up = self._current()
        score, part, given, healthy = _families()
        for item in scores:
            labels = [item.scope, item.name, item.service]
            if item.score is not None:
                score.add_metric(labels, item.score)
            for name, value in item.parts.items():
                part.add_metric([*labels, name], value)
            for field in fields(item.inputs):
                value = getattr(item.inputs, field.name)
                if value is not None:
                    given.add_metric([*labels, field.name], value)
        healthy.add_metric([], 1.0 if up else 0.0)
        return iter((score, part, given, healthy))

    def _current(self) -> tuple[list[CapacityScore], bool]:
        with self._lock:
            now = self._clock()
            if now - self._computed_at >= self._cache_s:
                self._computed_at = now
                try:
                    self._scores, self._up = capacity_scores(self._source, round(now * 1e9), self._settings), True
                except PrometheusError as error:
                    log.warning("capacity score: engine metrics unavailable: %s", error)
                    self._scores, self._up = [], False
            return self._scores, self._up


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
    return (
        GaugeMetricFamily(
            "hotspan_capacity_score", "Capacity health score, 0-100 (diagnosis.capacity).", labels=LABELS
        ),
        GaugeMetricFamily(
            "hotspan_capacity_part", "Headroom of one part of the capacity score, 0..1.", labels=[*LABELS, "part"]
        ),
        GaugeMetricFamily(
            "hotspan_capacity_input",
            "An input of the capacity score, in the unit its name says (usage 0..1, requests, 1/s, seconds).",
            labels=[*LABELS, "input"],
        ),
        GaugeMetricFamily("hotspan_capacity_up", "1 when the engines' metrics were read at the last computation."),
    )
