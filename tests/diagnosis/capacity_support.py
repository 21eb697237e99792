"""Hand-written vLLM engine metrics for the capacity score tests, served by the Prometheus stand-in."""

from __future__ import annotations

from prometheus_standin import PrometheusStandIn

T = 1_800_000_000.0
"""Window start, Unix seconds; the window is the minute after it."""
WINDOW_S = 60.0
BOUNDS = ("0.25", "0.5", "1.0", "2.5", "+Inf")


def add_engine(
    standin: PrometheusStandIn,
    labels: dict[str, str],
    *,
    kv: float,
    waiting: float,
    running: float,
    requests: float,
    ttft_counts: tuple[float, ...],
    start: float = T,
) -> None:
    """Constant gauges, and counters rising linearly from 0 at ``start`` (Unix seconds) to their window total a
    minute later; samples every 5 s from half a minute before ``start``."""
    times = [start - 30 + 5 * i for i in range(19)]

    def ramp(total: float) -> list[tuple[float, float]]:
        return [(t, total * min(1.0, max(0.0, (t - start) / WINDOW_S))) for t in times]

    standin.add("vllm:kv_cache_usage_perc", labels, [(t, kv) for t in times])
    standin.add("vllm:num_requests_waiting", labels, [(t, waiting) for t in times])
    standin.add("vllm:num_requests_running", labels, [(t, running) for t in times])
    standin.add("vllm:request_success_total", {**labels, "finished_reason": "stop"}, ramp(requests))
    for bound, count in zip(BOUNDS, ttft_counts, strict=True):
        standin.add("vllm:time_to_first_token_seconds_bucket", {**labels, "le": bound}, ramp(count))


def add_llama_pair(standin: PrometheusStandIn) -> None:
    """Two engines of the ``vllm-llama`` job (model ``llama``) over the minute after ``T``: ``a:8000`` healthy,
    ``b:8000`` queueing and over a 2 s TTFT SLO."""
    job = {"job": "vllm-llama", "model_name": "llama"}
    # A: a fifth of the cache, no queue, 60 requests whose TTFT p95 is in (0.25, 0.5] s.
    add_engine(standin, {**job, "instance": "a:8000"}, kv=0.2, waiting=0, running=4, requests=60,
               ttft_counts=(30, 60, 60, 60, 60))  # fmt: skip
    # B: 60 % of the cache, two waiting beside four running, 30 requests all in (1, 2.5] s.
    add_engine(standin, {**job, "instance": "b:8000"}, kv=0.6, waiting=2, running=4, requests=30,
               ttft_counts=(0, 0, 0, 30, 30))  # fmt: skip
