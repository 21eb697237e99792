"""Capacity health score: one 0-100 figure per vLLM engine and per serving service, with its parts.

Read from the engines' own metrics in Prometheus (:meth:`diagnosis.metrics.PrometheusMetricsSource.labelled_series`,
plain selectors; everything else is computed here), over a window (:attr:`CapacitySettings.window_s`):

==========================  ===========================================================================  ========
input                       series (vLLM v1 names; older ones where the new are absent)                  unit
==========================  ===========================================================================  ========
``kv_cache_usage``          mean of ``vllm:kv_cache_usage_perc`` (``vllm:gpu_cache_usage_perc``)           0..1
``requests_waiting``        mean of ``vllm:num_requests_waiting``                                         requests
``requests_running``        mean of ``vllm:num_requests_running``                                         requests
``request_rate_per_s``      increase of ``vllm:request_success_total`` (all finish reasons) / window       1/s
``ttft_p95_seconds``        p95 of the increase of ``vllm:time_to_first_token_seconds_bucket`` (linear    s
                            within a bucket, as PromQL's ``histogram_quantile``)
==========================  ===========================================================================  ========

An *engine* is one label set of those series less the metric's own labels (``le``, ``finished_reason``):
``instance`` (the scrape target), vLLM's ``engine`` (the engine core index) and ``model_name``. A *service* is the
scrape ``job`` (one vLLM deployment; ``vllm`` when the series carry none); its inputs pool its engines': the
fullest engine's KV cache, the summed queues, running requests and rates, and the TTFT of the summed histograms.

Each part is a headroom in 0..1 (1: plenty, 0: exhausted):

- ``kv_cache`` = ``1 - kv_cache_usage / kv_saturation`` (vLLM preempts sequences as the cache fills);
- ``queue`` = ``1 - requests_waiting / max(requests_running, 1)`` (a queue as long as the running batch: none
  left);
- ``ttft`` = ``1 - ttft_p95_seconds / ttft_slo_s`` (the SLO reached: none left); left out without first tokens;
- ``rate`` = ``1 - request_rate_per_s / max_rate_per_s``, only where the rate an engine is sized for is known
  (a load test's); otherwise the rate is reported as an input and not scored;

each clipped to [0, 1]. The score is the weighted geometric mean of the parts present, times 100::

    score = 100 * prod(max(part_i, 0.01) ** (w_i / sum(w)))

so one exhausted part pulls the figure down however healthy the others are (at the 0.01 floor a part weighted a
quarter caps the score near 32), while parts at half their headroom give 50. Source: project formula (issue 16);
the inputs are the ones vLLM's production dashboard plots for saturation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from diagnosis.metrics import (
    GaugeSamples,
    LabelledSeries,
    PrometheusMetricsSource,
    combined_gauge,
    counter_increase,
)

SERIES_GROUPS = ("kv_cache_usage", "waiting", "running", "request_success", "ttft_bucket")
"""What the score reads (keys of :data:`storage.prometheus.METRICS`), in
:meth:`PrometheusMetricsSource.labelled_series` order."""
ENGINE_LABELS = ("instance", "engine", "model_name")
"""Labels naming an engine (with the service's ``job``)."""
SERVICE_LABEL = "job"
DEFAULT_SERVICE = "vllm"
PARTS = ("kv_cache", "queue", "ttft", "rate")
"""The parts a score may have, in the order they are shown."""
PART_FLOOR = 0.01
"""Smallest part in the product, so an exhausted part caps the score instead of zeroing it."""


@dataclass(frozen=True)
class CapacitySettings:
    """What the score compares against.

    Attributes:
        ttft_slo_s: the p95 time-to-first-token objective, seconds.
        kv_saturation: KV cache usage (0..1) at which the cache counts as full.
        max_rate_per_s: requests per second one engine is sized for; ``None``: the rate is not scored.
        window_s: how far back the inputs are read, seconds.
        weights: part name -> weight (relative; parts absent from a score are left out of the sum).
    """

    ttft_slo_s: float = 2.0
    kv_saturation: float = 0.95
    max_rate_per_s: float | None = None
    window_s: float = 300.0
    weights: dict[str, float] = field(default_factory=lambda: {"kv_cache": 1.0, "queue": 1.0, "ttft": 1.0, "rate": 1.0})


@dataclass(frozen=True)
class CapacityInputs:
    """One engine's or service's inputs over the window (units in the module docstring; ``None``: no data)."""

    kv_cache_usage: float | None
    requests_waiting: float | None
    requests_running: float | None
    request_rate_per_s: float | None
    ttft_p95_seconds: float | None


@dataclass(frozen=True)
class CapacityScore:
    """The score of one engine (``scope="engine"``) or service (``scope="service"``).

    Attributes:
        scope: ``engine`` or ``service``.
        name: the engine (``instance/engine/model``, the labels it has) or the service (its ``job``).
        service: the service the engine belongs to (the service's own name for a service).
        score: 0..100, ``None`` when no part could be computed.
        parts: part name -> headroom 0..1 (only the parts computed).
        inputs: what the parts were computed from.
    """

    scope: str
    name: str
    service: str
    score: float | None
    parts: dict[str, float]
    inputs: CapacityInputs

    @property
    def weakest_part(self) -> str | None:
        """The part with the least headroom (the first in :data:`PARTS` order on a tie), which limits the score;
        ``None`` without parts."""
        ranked = sorted(self.parts, key=lambda name: (self.parts[name], PARTS.index(name)))
        return ranked[0] if ranked else None


def capacity_scores(
    source: PrometheusMetricsSource, end_ns: int, settings: CapacitySettings | None = None
) -> list[CapacityScore]:
    """Every engine's and service's score over the ``settings.window_s`` before ``end_ns`` (ns since the epoch),
    engines first, each sorted by name. Blocking (one query per series).

    Raises:
        storage.prometheus.PrometheusError: Prometheus could not be queried.
    """
    settings = settings or CapacitySettings()
    start_ns = end_ns - round(settings.window_s * 1e9)
    groups = source.labelled_series(SERIES_GROUPS, start_ns, end_ns)
    window = (start_ns / 1e9, end_ns / 1e9)
    engines: dict[tuple[str, str], list[list[LabelledSeries]]] = {}
    for position, result in enumerate(groups):
        for series in result:
            key = (_service(series.labels), _engine(series.labels))
            engines.setdefault(key, [[] for _ in SERIES_GROUPS])[position].append(series)
    scores = [
        _score("engine", name, service, _inputs(per_group, window), settings)
        for (service, name), per_group in sorted(engines.items(), key=lambda item: item[0][1])
    ]
    for service in sorted({service for service, _ in engines}):
        pooled = [
            [series for (owner, _), per_group in engines.items() if owner == service for series in per_group[position]]
            for position in range(len(SERIES_GROUPS))
        ]
        scores.append(_score("service", service, service, _inputs(pooled, window), settings))
    return scores


def score_parts(inputs: CapacityInputs, settings: CapacitySettings) -> dict[str, float]:
    """The headroom parts (module docstring) that ``inputs`` allow, each in 0..1."""
    parts: dict[str, float] = {}
    if inputs.kv_cache_usage is not None:
        parts["kv_cache"] = 1 - inputs.kv_cache_usage / settings.kv_saturation
    if inputs.requests_waiting is not None:
        parts["queue"] = 1 - inputs.requests_waiting / max(inputs.requests_running or 0.0, 1.0)
    if inputs.ttft_p95_seconds is not None:
        parts["ttft"] = 1 - inputs.ttft_p95_seconds / settings.ttft_slo_s
    if inputs.request_rate_per_s is not None and settings.max_rate_per_s:
        parts["rate"] = 1 - inputs.request_rate_per_s / settings.max_rate_per_s
    return {name: min(1.0, max(0.0, value)) for name, value in parts.items()}


def fuse(parts: dict[str, float], weights: dict[str, float]) -> float | None:
    """The weighted geometric mean of ``parts`` (floored at :data:`PART_FLOOR`) times 100, rounded to 0.1;
    ``None`` without parts. A part without a weight counts 1."""
    if not parts:
        return None
    total = sum(weights.get(name, 1.0) for name in parts)
    log_mean = sum(weights.get(name, 1.0) * math.log(max(value, PART_FLOOR)) for name, value in parts.items()) / total
    return round(100 * math.exp(log_mean), 1)


def _score(scope: str, name: str, service: str, inputs: CapacityInputs, settings: CapacitySettings) -> CapacityScore:
    parts = score_parts(inputs, settings)
    return CapacityScore(scope, name, service, fuse(parts, settings.weights), parts, inputs)


def _service(labels: dict[str, str]) -> str:
    return labels.get(SERVICE_LABEL) or DEFAULT_SERVICE


def _engine(labels: dict[str, str]) -> str:
    return "/".join(labels[key] for key in ENGINE_LABELS if labels.get(key)) or DEFAULT_SERVICE


def _inputs(per_group: Sequence[list[LabelledSeries]], window: tuple[float, float]) -> CapacityInputs:
    """The inputs from one engine's (or a service's pooled) series, in :data:`SERIES_GROUPS` order: gauges
    averaged over the window's steps, the KV usage of the fullest label set at each step (the engine that
    preempts), queues summed."""
    kv, waiting, running, success, buckets = per_group
    rate = counter_increase(success)
    return CapacityInputs(
        kv_cache_usage=_mean(combined_gauge(kv, np.maximum, window[0])),
        requests_waiting=_mean(combined_gauge(waiting, np.add, window[0])),
        requests_running=_mean(combined_gauge(running, np.add, window[0])),
        request_rate_per_s=None if rate is None else rate / max(window[1] - window[0], 1e-9),
        ttft_p95_seconds=_histogram_quantile(0.95, buckets),
    )


def _mean(samples: GaugeSamples | None) -> float | None:
    return None if samples is None else samples.mean


def _histogram_quantile(quantile: float, buckets: Sequence[LabelledSeries]) -> float | None:
    """The ``quantile`` of the observations a histogram's buckets (``le`` labels, cumulative counters) gained in
    the window, summed over label sets: linear within the bucket holding it, the highest finite bound when it
    falls in ``+Inf`` (PromQL's ``histogram_quantile``). ``None`` without observations."""
    per_bound: dict[float, float] = {}
    for item in buckets:
        bound = float(item.labels.get("le", "nan"))
        if not math.isnan(bound):
            per_bound[bound] = per_bound.get(bound, 0.0) + (counter_increase([item]) or 0.0)
    bounds = sorted(per_bound)
    if not bounds or per_bound[bounds[-1]] <= 0:
        return None
    # Counters of different buckets are scraped at slightly different moments: keep the cumulative counts monotone.
    counts = np.maximum.accumulate([per_bound[bound] for bound in bounds])
    rank = quantile * counts[-1]
    index = int(np.searchsorted(counts, rank, side="left"))
    if math.isinf(bounds[index]):
        finite = [bound for bound in bounds if math.isfinite(bound)]
        return finite[-1] if finite else None
    lower = bounds[index - 1] if index > 0 else 0.0
    below = counts[index - 1] if index > 0 else 0.0
    inside = counts[index] - below
    return float(lower + (bounds[index] - lower) * ((rank - below) / inside if inside > 0 else 1.0))
