"""vLLM's own metrics, read from a Prometheus server that scrapes the engines, for the window a page shows.

Hotspan stores traces, not engine metrics; with ``HOTSPAN_PROMETHEUS_URL`` set, the Services page plots these
beside the trace-derived latency so a latency change can be matched with queueing or cache pressure. Read
through :class:`storage.prometheus.PrometheusReader`, with its metric names (older vLLM names included: each
query takes the first name a target exposes, :func:`storage.prometheus.preferred`).

Series (PromQL aggregates over every engine; ``w`` is the rate window,
:attr:`PrometheusEngineMetrics.rate_window_s`, at least twice the step; ``s`` the step, at least half the rate
window, so that it holds a scrape):

=====================  ==================================================================  ========
series                 PromQL                                                              unit
=====================  ==================================================================  ========
``waiting``            ``sum(max_over_time(vllm:num_requests_waiting[s]))``                requests
``kv_cache_usage``     ``avg(max_over_time(vllm:kv_cache_usage_perc[s]))``                 0..1
``prefix_cache_hit``   ``sum(rate(..._hits_total[w])) / sum(rate(..._queries_total[w]))``   0..1
``ttft_p50_s``         ``histogram_quantile(0.5, sum by (le) (rate(..._bucket[w])))``        s
``ttft_p95_s``         same with 0.95                                                      s
=====================  ==================================================================  ========

The gauges are each step's peak: a range query samples a gauge once per step, and at the minute steps of a long
window a queue that fills and drains within a minute (the demo's fault, 8-17 s of queueing) read 0 waiting.

Engine metrics are infrastructure-wide: they are not split by Hotspan tenant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import polars as pl

from storage.prometheus import PrometheusReader, preferred

ENGINE_SERIES: tuple[str, ...] = ("waiting", "kv_cache_usage", "prefix_cache_hit", "ttft_p50_s", "ttft_p95_s")
"""The Services page's series, in drawing order."""


def engine_queries(rate_window: str, step_window: str) -> dict[str, str]:
    """Series name (:data:`ENGINE_SERIES`) → PromQL, ``rate_window`` the ``rate()`` window (e.g. ``"120s"``),
    ``step_window`` the window of a gauge's peak (``max_over_time``; one step, e.g. ``"60s"``)."""

    def ttft(quantile: float) -> str:
        return f"histogram_quantile({quantile}, sum by (le) ({preferred('ttft_bucket', rate_window)}))"

    hits, queries = preferred("prefix_cache_hits", rate_window), preferred("prefix_cache_queries", rate_window)
    return {
        "waiting": f"sum({preferred('waiting', step_window, 'max_over_time')})",
        "kv_cache_usage": f"avg({preferred('kv_cache_usage', step_window, 'max_over_time')})",
        "prefix_cache_hit": f"sum({hits}) / sum({queries})",
        "ttft_p50_s": ttft(0.5),
        "ttft_p95_s": ttft(0.95),
    }


ENGINE_COLUMNS = {"series": pl.String, "time_ns": pl.Int64, "value": pl.Float64}


class EngineMetricsReader(Protocol):
    """Engine metrics over a window. Thread-safe; blocking (one HTTP round trip per series)."""

    def engine_series(self, start_ns: int, end_ns: int, step_s: int) -> pl.DataFrame:
        """One row per series and sample: ``series`` (a key of :data:`ENGINE_SERIES`), ``time_ns`` (Int64 ns
        since the epoch), ``value`` (Float64, unit per series; NaN samples dropped). Sorted by series, time.

        Raises:
            PrometheusError: Prometheus failed.
        """
        ...


@dataclass(frozen=True)
class PrometheusEngineMetrics:
    """:class:`EngineMetricsReader` over a Prometheus HTTP API.

    Attributes:
        url: the Prometheus base URL, e.g. ``http://127.0.0.1:9090``.
        timeout_s: per-request timeout, seconds (``HOTSPAN_PROMETHEUS_TIMEOUT_S``; no default here, so the
            setting's is the only one).
        rate_window_s: window of ``rate()`` in seconds (raised to twice the step when smaller); it must cover
            at least two scrapes of the engines.
    """

    url: str
    timeout_s: float
    rate_window_s: int = 60

    def engine_series(self, start_ns: int, end_ns: int, step_s: int) -> pl.DataFrame:
        window = f"{max(self.rate_window_s, 2 * step_s)}s"
        step_window = f"{max(step_s, self.rate_window_s // 2, 1)}s"
        reader = PrometheusReader(self.url, self.timeout_s)
        results = reader.range_queries(
            engine_queries(window, step_window), start_ns / 1e9, end_ns / 1e9, max(1, step_s)
        )
        rows = [
            (name, round(float(timestamp) * 1e9), float(text))
            for name, result in results.items()
            for series in result
            for timestamp, text in series.get("values", [])
            if math.isfinite(float(text))  # NaN: a ratio or quantile over no data
        ]
        return pl.DataFrame(rows, schema=ENGINE_COLUMNS, orient="row").sort("series", "time_ns")
