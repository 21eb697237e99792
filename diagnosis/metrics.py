"""vLLM's engine metrics over a window, as diagnosis rules read them (through :mod:`storage.prometheus`).

Rules use them as corroboration (and, for the prefix cache, as the only direct evidence): the scheduler's
waiting queue, KV cache use, and the prefix cache's queried and hit tokens. Beside them, the hosts' CPU pressure
(Linux PSI, ``node_pressure_cpu_waiting_seconds_total``: seconds during which some runnable task waited for a
CPU), which tells host CPU contention apart from a slow service (``cpu_contention``). Metric names, with the
older vLLM names read when the new ones are absent, are :data:`storage.prometheus.METRICS`.

Only plain series selectors are sent; aggregation across engines and label sets and counter increases are
computed here. That keeps the queries valid on any Prometheus-compatible store (Prometheus, Thanos, Mimir,
VictoriaMetrics) and lets tests answer them with a small stand-in.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from storage.prometheus import PrometheusReader

DEFAULT_PROMETHEUS_TIMEOUT_S = 5.0
"""Per-query timeout of the engine metrics' reads, seconds (``HOTSPAN_PROMETHEUS_TIMEOUT_S``): a diagnosis waits
for its metrics at most this long per series before going on from traces alone."""

log = logging.getLogger(__name__)

MAX_POINTS = 500
"""Most points asked per series: the step grows with the window so long windows stay cheap."""


@dataclass(frozen=True)
class GaugeSamples:
    """A gauge summed over all engines (label sets) at each step of the window.

    Attributes:
        times_s: step timestamps, seconds since the Unix epoch.
        values: the summed value at each step.
    """

    times_s: npt.NDArray[np.float64]
    values: npt.NDArray[np.float64]

    @property
    def mean(self) -> float:
        """Mean over the steps."""
        return float(self.values.mean())

    @property
    def max(self) -> float:
        """Largest value."""
        return float(self.values.max())

    def share_above(self, threshold: float) -> float:
        """Share (0..1) of steps whose value is above ``threshold``."""
        return float((self.values > threshold).mean())


@dataclass(frozen=True)
class EngineMetrics:
    """vLLM metrics over one window; ``None`` where the store has no such series.

    Attributes:
        source: where they came from (the Prometheus URL), for the evidence.
        num_requests_waiting, num_requests_running: gauges (requests), summed over engines.
        kv_cache_usage: gauge, fraction 0..1 of KV cache blocks in use, the **maximum** over engines at each
            step (the fullest engine is the one that preempts).
        prefix_cache_queries_tokens, prefix_cache_hits_tokens: tokens looked up in and found in the prefix
            cache during the window (counter increases). vLLM records no queries with caching disabled.
        prompt_tokens: prompt tokens the engines processed during the window (counter increase).
        cpu_waiting_share: share (0..1) of the window during which some task waited for a CPU (Linux PSI
            ``cpu some``: the increase of ``node_pressure_cpu_waiting_seconds_total`` over the seconds it spans),
            on the **most** pressured host (series) of the window; ``None`` without the series.
        cpu_waiting_instance: the ``instance`` label of that host, ``""`` when the series has none.
    """

    source: str
    num_requests_waiting: GaugeSamples | None = None
    num_requests_running: GaugeSamples | None = None
    kv_cache_usage: GaugeSamples | None = None
    prefix_cache_queries_tokens: float | None = None
    prefix_cache_hits_tokens: float | None = None
    prompt_tokens: float | None = None
    cpu_waiting_share: float | None = None
    cpu_waiting_instance: str | None = None

    @property
    def prefix_cache_hit_share(self) -> float | None:
        """Hits over queries (0..1); ``None`` without queries."""
        queries, hits = self.prefix_cache_queries_tokens, self.prefix_cache_hits_tokens
        if not queries or hits is None:
            return None
        return hits / queries

    @property
    def prefix_caching_disabled(self) -> bool:
        """True when the engines processed prompt tokens but looked none up in the prefix cache, which is what
        vLLM reports with prefix caching off (``--no-enable-prefix-caching``)."""
        return self.prefix_cache_queries_tokens == 0 and bool(self.prompt_tokens)


class MetricsSource(Protocol):
    """Where engine metrics come from. Implementations block (network I/O) and are thread-safe."""

    def engine_metrics(self, start_ns: int, end_ns: int) -> EngineMetrics:
        """Metrics over ``[start_ns, end_ns]`` (ns since the Unix epoch).

        Raises:
            PrometheusError: the store could not be queried.
        """
        ...


class PrometheusMetricsSource:
    """:class:`MetricsSource` over the Prometheus HTTP API (``/api/v1/query_range``).

    Args:
        url: Prometheus base URL, e.g. ``http://127.0.0.1:9090``.
        timeout_s: per-query timeout, seconds.
        min_step_s: smallest query step, seconds (Prometheus scrapes every 15 s by default; a finer step
            only repeats samples, a coarser one can miss a short burst).
    """

    def __init__(self, url: str, *, timeout_s: float = DEFAULT_PROMETHEUS_TIMEOUT_S, min_step_s: float = 1.0) -> None:
        self.url = url.rstrip("/")
        # No retries (the reader's rule): diagnosis falls back to trace-only evidence rather than wait.
        self._reader = PrometheusReader(self.url, timeout_s)
        self._min_step_s = min_step_s

    def engine_metrics(self, start_ns: int, end_ns: int) -> EngineMetrics:
        metrics = ("waiting", "running", "kv_cache_usage", "prefix_cache_queries", "prefix_cache_hits")
        waiting, running, kv, queries, hits, prompts, cpu = self.labelled_series(
            (*metrics, "prompt_tokens", "cpu_waiting"), start_ns, end_ns
        )
        since_s = math.floor(start_ns / 1e9)
        waiting_share, waiting_instance = _busiest(cpu)
        return EngineMetrics(
            source=self.url,
            num_requests_waiting=combined_gauge(waiting, np.add, since_s),
            num_requests_running=combined_gauge(running, np.add, since_s),
            kv_cache_usage=combined_gauge(kv, np.maximum, since_s),
            prefix_cache_queries_tokens=counter_increase(queries),
            prefix_cache_hits_tokens=counter_increase(hits),
            prompt_tokens=counter_increase(prompts),
            cpu_waiting_share=waiting_share,
            cpu_waiting_instance=waiting_instance,
        )

    def labelled_series(self, metrics: Sequence[str], start_ns: int, end_ns: int) -> list[list[LabelledSeries]]:
        """Per metric (a key of :data:`storage.prometheus.METRICS`), every label set of the first of its names the
        store holds over ``[start_ns, end_ns]`` (ns since the Unix epoch), with one step before the window (a
        counter's baseline); an empty list where it holds none of them.

        Raises:
            PrometheusError: the store could not be queried.
        """
        window_s = max((end_ns - start_ns) / 1e9, 0.0)
        step_s = max(self._min_step_s, window_s / MAX_POINTS)
        start_s, end_s = start_ns / 1e9 - step_s, end_ns / 1e9
        return [
            [
                LabelledSeries(dict(item.get("metric", {})), *_points(item))
                for item in self._reader.first_series(metric, start_s, end_s, step_s)
            ]
            for metric in metrics
        ]


@dataclass(frozen=True)
class LabelledSeries:
    """One series (label set) of a metric over a window.

    Attributes:
        labels: its labels (``__name__`` included), e.g. ``{"instance": "10.0.0.7:8000", "engine": "0"}``.
        times_s: sample times, seconds since the Unix epoch (finite samples only).
        values: the samples.
    """

    labels: dict[str, str]
    times_s: npt.NDArray[np.float64]
    values: npt.NDArray[np.float64]


def _points(series: dict[str, Any]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    values = np.asarray([[float(t), float(v)] for t, v in series["values"]], dtype=np.float64).reshape(-1, 2)
    finite = np.isfinite(values[:, 1])
    return values[finite, 0], values[finite, 1]


def combined_gauge(series: Sequence[LabelledSeries], combine: Any, since_s: float) -> GaugeSamples | None:
    """Label sets of a gauge combined per timestamp (``np.add`` sums engines, ``np.maximum`` keeps the largest),
    from ``since_s`` (Unix seconds) on (the step before the window is there for the counters' baseline only);
    ``None`` without samples."""
    combined: dict[float, float] = {}
    for item in series:
        for t, v in zip(item.times_s, item.values, strict=True):
            if t < since_s:
                continue
            combined[t] = float(combine(combined[t], v)) if t in combined else float(v)
    if not combined:
        return None
    times = np.asarray(sorted(combined), dtype=np.float64)
    return GaugeSamples(times, np.asarray([combined[t] for t in times], dtype=np.float64))


def counter_increase(series: Sequence[LabelledSeries]) -> float | None:
    """A counter's increase over the window, summed over its label sets (from the step before the window, the
    baseline :meth:`PrometheusMetricsSource.labelled_series` includes): positive steps add, a drop is a restart
    that began at 0 (Prometheus's ``increase`` without extrapolation). ``None`` without any label set."""
    if not series:
        return None
    return float(sum(_increase(item.values) for item in series))


def _increase(values: npt.NDArray[np.float64]) -> float:
    """One counter series' increase: positive steps add, a drop is a restart from 0 (0 with under two samples)."""
    steps = np.diff(values)
    return float(np.where(steps >= 0, steps, values[1:]).sum())


def _busiest(series: Sequence[LabelledSeries]) -> tuple[float | None, str | None]:
    """Of counters of seconds spent in a state (one series per host), the highest share of wall time (0..1):
    each series' increase over the seconds between its first and last sample; and that series' ``instance``.
    ``(None, None)`` when no series has two samples."""
    best: tuple[float | None, str | None] = (None, None)
    for item in series:
        times, values = item.times_s, item.values
        if values.size < 2 or times[-1] <= times[0]:
            continue
        share = min(1.0, max(0.0, _increase(values) / float(times[-1] - times[0])))
        if best[0] is None or share > best[0]:
            best = (share, str(item.labels.get("instance", "")))
    return best
