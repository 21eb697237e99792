"""vLLM's own metrics, read from a Prometheus server that scrapes the engines, for the window a page shows.

Hotspan stores traces, not engine metrics; with ``HOTSPAN_PROMETHEUS_URL`` set, the Services page plots these
beside the trace-derived latency so a latency change can be matched with queueing or cache pressure. Read
through prometheus-api-client's range queries (``/api/v1/query_range``).

Series (PromQL over vLLM v1 metric names; every engine summed, or averaged for the usage gauge):

=====================  ==============================================================================  ========
series                 PromQL                                                                          unit
=====================  ==============================================================================  ========
``waiting``            ``sum(vllm:num_requests_waiting)``                                              requests
``kv_cache_usage``     ``avg(vllm:kv_cache_usage_perc)``                                               0..1
``prefix_cache_hit``   ``sum(rate(vllm:prefix_cache_hits_total[w])) / sum(rate(..._queries_total[w]))`` 0..1
``ttft_p50_s``         ``histogram_quantile(0.5, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[w])))``  s
``ttft_p95_s``         same with 0.95                                                                  s
=====================  ==============================================================================  ========

``w`` is the rate window: :attr:`PrometheusEngineMetrics.rate_window_s`, at least twice the step.
Engine metrics are infrastructure-wide: they are not split by Hotspan tenant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import polars as pl
import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

ENGINE_SERIES: dict[str, str] = {
    "waiting": "sum(vllm:num_requests_waiting)",
    "kv_cache_usage": "avg(vllm:kv_cache_usage_perc)",
    "prefix_cache_hit": (
        "sum(rate(vllm:prefix_cache_hits_total[{window}])) / sum(rate(vllm:prefix_cache_queries_total[{window}]))"
    ),
    "ttft_p50_s": "histogram_quantile(0.5, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[{window}])))",
    "ttft_p95_s": "histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[{window}])))",
}
"""Series name → PromQL (``{window}`` is the rate window, e.g. ``120s``)."""

ENGINE_COLUMNS = {"series": pl.String, "time_ns": pl.Int64, "value": pl.Float64}


class EngineMetricsError(RuntimeError):
    """Prometheus could not be reached or refused a query."""


class EngineMetricsReader(Protocol):
    """Engine metrics over a window. Thread-safe; blocking (one HTTP round trip per series)."""

    def engine_series(self, start_ns: int, end_ns: int, step_s: int) -> pl.DataFrame:
        """One row per series and sample: ``series`` (a key of :data:`ENGINE_SERIES`), ``time_ns`` (Int64 ns
        since the epoch), ``value`` (Float64, unit per series; NaN samples dropped). Sorted by series, time.

        Raises:
            EngineMetricsError: Prometheus failed.
        """
        ...


@dataclass(frozen=True)
class PrometheusEngineMetrics:
    """:class:`EngineMetricsReader` over a Prometheus HTTP API.

    Attributes:
        url: the Prometheus base URL, e.g. ``http://127.0.0.1:9090``.
        rate_window_s: window of ``rate()`` in seconds (raised to twice the step when smaller); it must cover
            at least two scrapes of the engines.
        timeout_s: per-request timeout.
    """

    url: str
    rate_window_s: int = 60
    timeout_s: float = 10.0

    def engine_series(self, start_ns: int, end_ns: int, step_s: int) -> pl.DataFrame:
        # No retries: a page waits on this, and a sick Prometheus should show as a message, not a hang.
        client = PrometheusConnect(
            url=self.url, disable_ssl=True, timeout=self.timeout_s, retry=Retry(total=0, raise_on_status=False)
        )
        window = f"{max(self.rate_window_s, 2 * step_s)}s"
        start = datetime.fromtimestamp(start_ns / 1e9, tz=UTC)
        end = datetime.fromtimestamp(end_ns / 1e9, tz=UTC)
        rows: list[tuple[str, int, float]] = []
        try:
            for name, template in ENGINE_SERIES.items():
                try:
                    result = client.custom_query_range(
                        template.format(window=window), start_time=start, end_time=end, step=f"{max(1, step_s)}s"
                    )
                except (requests.RequestException, PrometheusApiClientException, ValueError) as exc:
                    raise EngineMetricsError(f"Prometheus at {self.url}: {name}: {exc}") from exc
                for series in result:
                    for timestamp, text in series.get("values", []):
                        value = float(text)
                        if math.isfinite(value):  # NaN: a ratio or quantile over no data
                            rows.append((name, round(float(timestamp) * 1e9), value))
        finally:
            client.close()
        return pl.DataFrame(rows, schema=ENGINE_COLUMNS, orient="row").sort("series", "time_ns")
