"""A run's summary: throughput, client-side latency percentiles, TTFT from the engine's metrics, errors.

TTFT is not visible to the users (the gateway answers in one piece), so it comes from the engine's
``vllm:time_to_first_token_seconds`` histogram, scraped from ``/metrics`` after the run, with the same
linear interpolation inside a bucket that PromQL's ``histogram_quantile`` uses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from instrumented_stack.loadgen import RequestOutcome

TTFT_METRIC = "vllm:time_to_first_token_seconds"


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    """A Prometheus histogram: ``buckets`` as ``(upper bound, cumulative count)`` ascending, ``+Inf`` last;
    ``total`` (the ``_sum``) and ``count``."""

    buckets: tuple[tuple[float, float], ...]
    total: float
    count: float

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile (0..1) by linear interpolation within the bucket; ``None`` without samples.
        A quantile in the ``+Inf`` bucket returns the largest finite bound."""
        if self.count <= 0 or not self.buckets:
            return None
        rank = q * self.count
        lower_bound, lower_count = 0.0, 0.0
        for bound, cumulative in self.buckets:
            if cumulative >= rank:
                if bound == float("inf"):
                    return lower_bound
                width = cumulative - lower_count
                return lower_bound + (bound - lower_bound) * ((rank - lower_count) / width if width else 1.0)
            lower_bound, lower_count = bound, cumulative
        return lower_bound


def parse_histogram(exposition: str, name: str) -> HistogramSnapshot | None:
    """The histogram ``name`` from a text exposition, summed over label sets; ``None`` when absent."""
    for family in text_string_to_metric_families(exposition):
        if family.name != name:
            continue
        buckets: dict[float, float] = {}
        total = count = 0.0
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
            elif sample.name.endswith("_sum"):
                total += sample.value
            elif sample.name.endswith("_count"):
                count += sample.value
        return HistogramSnapshot(tuple(sorted(buckets.items())), total, count)
    return None


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What one run did.

    Attributes:
        requests: user requests sent.
        errors: requests that did not get a 200.
        statuses: count per HTTP status (``"none"`` when no response came back).
        qps: answered requests per second of ``duration_s``.
        p50_e2e_ms, p95_e2e_ms, p99_e2e_ms: client-side end-to-end latency percentiles of the successful
            requests, **milliseconds** (linear interpolation); ``None`` when none succeeded.
        ttft_p50_ms, ttft_p95_ms: engine TTFT percentiles from its histogram, **milliseconds**; ``None``
            when not scraped.
        duration_s: wall-clock **seconds** from the first request to the last answer.
        outcomes: every request, in workload order (trace ids included).
    """

    requests: int
    errors: int
    statuses: dict[str, int]
    qps: float
    p50_e2e_ms: float | None
    p95_e2e_ms: float | None
    p99_e2e_ms: float | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    duration_s: float
    outcomes: tuple[RequestOutcome, ...]

    def __str__(self) -> str:
        """One line, e.g. ``20 requests, 0 errors, 4.1 QPS, e2e p50 212.4 ms, p95 ..., p99 ... in 4.3 s``."""
        if self.p50_e2e_ms is None or self.p95_e2e_ms is None or self.p99_e2e_ms is None:
            latency = "no successful request"
        else:
            latency = f"e2e p50 {self.p50_e2e_ms:.1f} ms, p95 {self.p95_e2e_ms:.1f} ms, p99 {self.p99_e2e_ms:.1f} ms"
        ttft = ""
        if self.ttft_p50_ms is not None and self.ttft_p95_ms is not None:
            ttft = f", TTFT p50 {self.ttft_p50_ms:.1f} ms, p95 {self.ttft_p95_ms:.1f} ms"
        return (
            f"{self.requests} requests, {self.errors} errors, {self.qps:.2f} QPS, {latency}{ttft} "
            f"in {self.duration_s:.1f} s"
        )

    def to_json(self) -> dict[str, object]:
        """The summary without the per-request outcomes, JSON-ready."""
        return {
            "requests": self.requests,
            "errors": self.errors,
            "statuses": self.statuses,
            "qps": self.qps,
            "e2e_ms": {"p50": self.p50_e2e_ms, "p95": self.p95_e2e_ms, "p99": self.p99_e2e_ms},
            "ttft_ms": {"p50": self.ttft_p50_ms, "p95": self.ttft_p95_ms},
            "duration_s": self.duration_s,
        }


def summarise(
    outcomes: Sequence[RequestOutcome], duration_s: float, ttft: HistogramSnapshot | None = None
) -> RunSummary:
    """A :class:`RunSummary` of ``outcomes`` over ``duration_s`` **seconds**, with TTFT from ``ttft``."""
    latencies = np.array([outcome.latency_ms for outcome in outcomes if outcome.ok], dtype=float)
    p50 = p95 = p99 = None
    if latencies.size:
        p50, p95, p99 = (float(v) for v in np.percentile(latencies, [50, 95, 99]))
    ttft_p50 = ttft.quantile(0.5) if ttft else None
    ttft_p95 = ttft.quantile(0.95) if ttft else None
    statuses = Counter(str(outcome.status) if outcome.status is not None else "none" for outcome in outcomes)
    return RunSummary(
        requests=len(outcomes),
        errors=sum(not outcome.ok for outcome in outcomes),
        statuses=dict(statuses),
        qps=len(outcomes) / duration_s if duration_s > 0 else 0.0,
        p50_e2e_ms=p50,
        p95_e2e_ms=p95,
        p99_e2e_ms=p99,
        ttft_p50_ms=ttft_p50 * 1e3 if ttft_p50 is not None else None,
        ttft_p95_ms=ttft_p95 * 1e3 if ttft_p95 is not None else None,
        duration_s=duration_s,
        outcomes=tuple(outcomes),
    )
