"""vLLM's engine metrics over a window, read from Prometheus with ``prometheus-api-client``.

Rules use them as corroboration (and, for the prefix cache, as the only direct evidence): the scheduler's
waiting queue (``vllm:num_requests_waiting``), KV cache use (``vllm:kv_cache_usage_perc``), and the prefix
cache's queried and hit tokens (``vllm:prefix_cache_queries``/``hits``, counters, so ``_total`` in Prometheus).
Names follow vLLM v1 (``vllm/v1/metrics/loggers.py``); the older names (``vllm:gpu_cache_usage_perc``,
``vllm:gpu_prefix_cache_queries``/``hits``) are read when the new ones are absent.

Only plain series selectors are sent (``query_range`` of ``vllm:num_requests_waiting``); aggregation across
engines and label sets and counter increases are computed here. That keeps the queries valid on any
Prometheus-compatible store (Prometheus, Thanos, Mimir, VictoriaMetrics) and lets tests answer them with a
small stand-in.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

log = logging.getLogger(__name__)

WAITING = ("vllm:num_requests_waiting",)
RUNNING = ("vllm:num_requests_running",)
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
PREFIX_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
PREFIX_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
PROMPT_TOKENS = ("vllm:prompt_tokens_total",)
"""Series names in preference order (vLLM v1 first, then the names older releases exposed)."""

MAX_POINTS = 500
"""Most points asked per series: the step grows with the window so long windows stay cheap."""


class MetricsUnavailableError(RuntimeError):
    """The metrics store could not be queried (unreachable, timed out, or answered with an error)."""


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
    """

    source: str
    num_requests_waiting: GaugeSamples | None = None
    num_requests_running: GaugeSamples | None = None
    kv_cache_usage: GaugeSamples | None = None
    prefix_cache_queries_tokens: float | None = None
    prefix_cache_hits_tokens: float | None = None
    prompt_tokens: float | None = None

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
            MetricsUnavailableError: the store could not be queried.
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

    def __init__(self, url: str, *, timeout_s: float = 5.0, min_step_s: float = 1.0) -> None:
        self.url = url.rstrip("/")
        self._timeout_s = timeout_s
        self._min_step_s = min_step_s

    def engine_metrics(self, start_ns: int, end_ns: int) -> EngineMetrics:
        groups = (WAITING, RUNNING, KV_USAGE, PREFIX_QUERIES, PREFIX_HITS, PROMPT_TOKENS)
        waiting, running, kv, queries, hits, prompts = self.labelled_series(groups, start_ns, end_ns)
        since_s = math.floor(start_ns / 1e9)
        return EngineMetrics(
            source=self.url,
            num_requests_waiting=combined_gauge(waiting, np.add, since_s),
            num_requests_running=combined_gauge(running, np.add, since_s),
            kv_cache_usage=combined_gauge(kv, np.maximum, since_s),
            prefix_cache_queries_tokens=counter_increase(queries),
            prefix_cache_hits_tokens=counter_increase(hits),
            prompt_tokens=counter_increase(prompts),
        )

    def labelled_series(
        self, groups: Sequence[tuple[str, ...]], start_ns: int, end_ns: int
    ) -> list[list[LabelledSeries]]:
        """Per group of series names (preference order, as :data:`KV_USAGE`), every label set of the first name
        the store holds over ``[start_ns, end_ns]`` (ns since the Unix epoch), with one step before the window
        (a counter's baseline); an empty list where it holds none of them.

        Raises:
            MetricsUnavailableError: the store could not be queried.
        """
        window_s = max((end_ns - start_ns) / 1e9, 0.0)
        step_s = max(self._min_step_s, window_s / MAX_POINTS)
        # One step before the window gives counters their baseline; the client sends whole seconds, so round
        # outward to keep every sample of a sub-second window.
        start = datetime.fromtimestamp(math.floor(start_ns / 1e9 - step_s), UTC)
        end = datetime.fromtimestamp(math.ceil(end_ns / 1e9), UTC)
        # No retries: diagnosis falls back to trace-only evidence rather than wait on a sick store.
        client = PrometheusConnect(url=self.url, timeout=self._timeout_s, retry=Retry(total=0, raise_on_status=False))
        try:

            def series(names: tuple[str, ...]) -> list[LabelledSeries]:
                for name in names:
                    result = client.custom_query_range(name, start_time=start, end_time=end, step=f"{step_s:g}s")
                    if result:
                        return [LabelledSeries(dict(item.get("metric", {})), *_points(item)) for item in result]
                return []

            return [series(names) for names in groups]
        # requests' errors are OSErrors (connection, timeout) or ValueErrors (a body that is not JSON).
        except (OSError, PrometheusApiClientException, KeyError, ValueError) as error:
            raise MetricsUnavailableError(f"Prometheus at {self.url}: {error}") from error
        finally:
            client.close()


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
    total = 0.0
    for item in series:
        values = item.values
        if values.size < 2:
            continue
        steps = np.diff(values)
        total += float(np.where(steps >= 0, steps, values[1:]).sum())
    return total
