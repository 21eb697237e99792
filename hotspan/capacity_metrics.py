"""The capacity health score on Hotspan's ``/metrics`` (:mod:`diagnosis.capacity`), read from Prometheus at scrape.

Families (labels ``scope`` = ``engine`` or ``service``, ``name`` = the engine or service, ``service``):

- ``hotspan_capacity_score``: 0-100 (absent where no part could be computed);
- ``hotspan_capacity_part{part=kv_cache|queue|ttft|rate}``: each headroom, 0..1;
- ``hotspan_capacity_input{input=kv_cache_usage|requests_waiting|requests_running|request_rate_per_s|
  ttft_p95_seconds}``: what the parts were computed from;
- ``hotspan_capacity_up``: 1 when the last read of the engines' metrics succeeded, else 0.

The scores come from the query room's :class:`query.capacity.CapacityService` (what the REST API and the Services
page show too), computed at most once per ``cache_s`` (scrapes in between get the same values), so a Prometheus
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

from diagnosis.capacity import CapacityScore
from query.capacity import CapacityService

log = logging.getLogger(__name__)

LABELS = ("scope", "name", "service")


class CapacityCollector(Collector):
    """A prometheus_client collector of the capacity scores (module docstring). Thread-safe.

    Args:
        service: the scores, over the engines' Prometheus.
        cache_s: seconds a computation serves scrapes.
        clock: seconds since the epoch (tests pass their own).
    """

    def __init__(
        self,
        service: CapacityService,
        cache_s: float = 15.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._service = service
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
                report = self._service.report(round(now * 1e9))
                if report.status != "ok":
                    log.warning("capacity score: %s", report.message)
                self._scores, self._up = report.scores, report.status == "ok"
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
