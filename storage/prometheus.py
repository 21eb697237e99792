"""The one Prometheus reader: vLLM's and the hosts' metrics, read over the Prometheus HTTP API.

Hotspan stores traces, not metrics; with ``HOTSPAN_PROMETHEUS_URL`` set, diagnosis (:mod:`diagnosis.metrics`)
and the Services page (:mod:`storage.engine_metrics`) read the engines' metrics from a Prometheus-compatible
store (Prometheus, Thanos, Mimir, VictoriaMetrics) through :class:`PrometheusReader`, with the metric names of
:data:`METRICS` and one error type, :class:`PrometheusError`.

Names follow vLLM v1 (``vllm/v1/metrics/loggers.py``); each entry also lists the names older releases exposed
(``vllm:gpu_cache_usage_perc``, ``vllm:gpu_prefix_cache_queries``/``hits``), read when the new ones are absent.
Counters carry Prometheus's ``_total`` suffix. CPU pressure is Linux PSI as node_exporter exports it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

METRICS: dict[str, tuple[str, ...]] = {
    "waiting": ("vllm:num_requests_waiting",),
    "running": ("vllm:num_requests_running",),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "request_success": ("vllm:request_success_total",),
    "ttft_bucket": ("vllm:time_to_first_token_seconds_bucket",),
    "cpu_waiting": ("node_pressure_cpu_waiting_seconds_total",),
}
"""Metric → its series names in preference order (vLLM v1 first, then older releases' names). Units: requests
(``waiting``, ``running``; ``request_success`` counts them), fraction 0..1 (``kv_cache_usage``), tokens
(``prefix_cache_*``, ``prompt_tokens``: counters), seconds (``ttft_bucket`` histogram buckets, ``cpu_waiting``
a counter of seconds waited)."""


def preferred(metric: str, rate_window: str | None = None, over: str = "rate") -> str:
    """A PromQL vector for ``metric`` that takes the first of its :data:`METRICS` names a target exposes:
    ``a or b`` (``or`` keeps the left side's series where both exist), each name wrapped in
    ``over(...[rate_window])`` when a window (e.g. ``"120s"``) is given: ``rate`` by default, or a range function
    such as ``max_over_time``.

    Raises:
        KeyError: ``metric`` is not in :data:`METRICS`.
    """
    names = METRICS[metric]
    return " or ".join(f"{over}({name}[{rate_window}])" if rate_window else name for name in names)


class PrometheusError(RuntimeError):
    """Prometheus could not be reached, timed out, or refused or failed a query."""


@dataclass(frozen=True)
class PrometheusReader:
    """Range queries (``/api/v1/query_range``) against one Prometheus, without retries: pages and diagnoses wait
    on it, and a sick store should show as a message (or trace-only evidence), not a hang. Thread-safe; each
    call opens and closes its own HTTP session.

    Attributes:
        url: the Prometheus base URL, e.g. ``http://127.0.0.1:9090``.
        timeout_s: per-request timeout, seconds (``HOTSPAN_PROMETHEUS_TIMEOUT_S``, passed down by every caller).
    """

    url: str
    timeout_s: float

    def range_queries(
        self, queries: dict[str, str], start_s: float, end_s: float, step_s: float
    ) -> dict[str, list[dict[str, Any]]]:
        """Run each PromQL query over ``[start_s, end_s]`` (seconds since the Unix epoch; sent as whole seconds,
        rounded outward) at ``step_s`` seconds.

        Returns:
            Query name → Prometheus's ``matrix`` result: a list of ``{"metric": labels, "values": [[t_s, "v"],
            ...]}``.

        Raises:
            PrometheusError: Prometheus failed on any of them (the message names the query).
        """
        client = PrometheusConnect(
            url=self.url.rstrip("/"),
            disable_ssl=True,
            timeout=self.timeout_s,
            retry=Retry(total=0, raise_on_status=False),
        )
        start = datetime.fromtimestamp(math.floor(start_s), UTC)
        end = datetime.fromtimestamp(math.ceil(end_s), UTC)
        results: dict[str, list[dict[str, Any]]] = {}
        try:
            for name, promql in queries.items():
                try:
                    # Plain seconds: Prometheus reads "3.6" but refuses "3.6s" (a duration's number must be whole).
                    results[name] = client.custom_query_range(
                        promql, start_time=start, end_time=end, step=f"{step_s:g}"
                    )
                # requests' errors are OSErrors (connection, timeout) or ValueErrors (a body that is not JSON).
                except (OSError, PrometheusApiClientException, KeyError, ValueError) as exc:
                    raise PrometheusError(f"Prometheus at {self.url}: {name}: {exc}") from exc
        finally:
            client.close()
        return results

    def first_series(self, metric: str, start_s: float, end_s: float, step_s: float) -> list[dict[str, Any]]:
        """The raw series of ``metric`` under the first of its :data:`METRICS` names that has samples in the
        window (plain selectors only, so any Prometheus-compatible store answers); ``[]`` when none has.

        Raises:
            PrometheusError: Prometheus failed.
        """
        for name in METRICS[metric]:
            result = self.range_queries({metric: name}, start_s, end_s, step_s)[metric]
            if result:
                return result
        return []
