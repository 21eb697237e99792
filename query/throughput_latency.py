"""The throughput-latency view: per engine configuration and time bucket, what the engine achieved (requests/s,
output tokens/s) against its latency (p50/p95 end to end and TTFT), and which points are on the Pareto frontier
(throughput up, latency down). The API route and the UI page both read it here.

Throughput of a point is its requests (or output tokens) divided by the time its configuration was serving in the
bucket: from the first request's arrival to the last one's finish (``active_s``). A sweep changes configuration
mid-bucket, so dividing by the bucket's width would understate a configuration that served only part of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import polars as pl

from analysis.pareto import pareto_frontier
from storage.engine_reader import EngineReader, EngineWindow
from storage.engine_sql import CONFIG_COLUMNS
from units import NS_PER_MS, NS_PER_S

Throughput = Literal["requests_per_s", "output_tokens_per_s"]
Latency = Literal["e2e_p50_ms", "e2e_p95_ms", "ttft_p50_ms", "ttft_p95_ms"]
THROUGHPUTS: tuple[Throughput, ...] = ("requests_per_s", "output_tokens_per_s")
LATENCIES: tuple[Latency, ...] = ("e2e_p50_ms", "e2e_p95_ms", "ttft_p50_ms", "ttft_p95_ms")
CONFIG_KEYS: tuple[str, ...] = tuple(CONFIG_COLUMNS)
"""Configuration fields besides the service and the model, in label order."""
MIN_ACTIVE_S = 1e-3
"""Floor of ``active_s`` (a single request of zero duration would divide by zero)."""
_LABELS = {
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_batched_tokens",
    "enable_chunked_prefill": "chunked_prefill",
    "enable_prefix_caching": "prefix_caching",
    "tensor_parallel_size": "tp",
}


@dataclass(frozen=True)
class ThroughputLatency:
    """The view of one window.

    Attributes:
        points: one row per (configuration, bucket): ``service_name``, ``model``, the :data:`CONFIG_KEYS` (String,
            ``''`` when the engine does not report it), ``label`` (the configuration in words),
            ``bucket_start_ns`` (Int64), ``requests``, ``output_tokens``, ``active_s`` (Float64 s),
            ``requests_per_s``, ``output_tokens_per_s``, ``e2e_p50_ms``, ``e2e_p95_ms``, ``ttft_p50_ms``,
            ``ttft_p95_ms`` (Float64 ms, TTFT null when unknown), ``example_trace_ids`` (List[String], slowest
            first), ``on_frontier`` (Boolean); sorted by configuration then bucket.
        throughput, latency: the two objectives the frontier was computed on.
    """

    points: pl.DataFrame
    throughput: Throughput
    latency: Latency


def throughput_latency(
    reader: EngineReader,
    window: EngineWindow,
    *,
    throughput: Throughput = "requests_per_s",
    latency: Latency = "e2e_p95_ms",
    tenant: str | None,
) -> ThroughputLatency:
    """Read ``window``'s points and mark the Pareto frontier of (``throughput`` up, ``latency`` down) over all of
    them (:func:`analysis.pareto.pareto_frontier`). Blocking.

    Raises:
        ValueError: an unknown ``throughput`` or ``latency``, or what the reader raises.
    """
    if throughput not in THROUGHPUTS or latency not in LATENCIES:
        raise ValueError(f"throughput must be one of {THROUGHPUTS} and latency one of {LATENCIES}")
    rows = reader.engine_buckets(window, tenant=tenant)
    active_s = ((pl.col("last_end_ns") - pl.col("first_start_ns")) / NS_PER_S).clip(lower_bound=MIN_ACTIVE_S)
    points = rows.with_columns(active_s.alias("active_s")).select(
        "service_name",
        "model",
        *CONFIG_KEYS,
        config_label().alias("label"),
        pl.col("bucket_start_ns").cast(pl.Int64),
        pl.col("requests").cast(pl.Int64),
        pl.col("output_tokens").cast(pl.Int64),
        "active_s",
        (pl.col("requests") / pl.col("active_s")).alias("requests_per_s"),
        (pl.col("output_tokens") / pl.col("active_s")).alias("output_tokens_per_s"),
        *((pl.col(f"{name}_ns") / NS_PER_MS).cast(pl.Float64).alias(f"{name}_ms") for name in _QUANTILES),
        "example_trace_ids",
    )
    frontier = pareto_frontier(points[throughput].to_numpy(), points[latency].fill_null(float("nan")).to_numpy())
    return ThroughputLatency(
        points.with_columns(on_frontier=pl.Series(frontier, dtype=pl.Boolean)), throughput, latency
    )


_QUANTILES = ("e2e_p50", "e2e_p95", "ttft_p50", "ttft_p95")


def config_label() -> pl.Expr:
    """The configuration in words, e.g. ``llama-8b max_num_seqs=32 max_batched_tokens=4096 prefix_caching=true``:
    the model, then each reported :data:`CONFIG_KEYS` field (absent ones left out)."""
    parts = [pl.col("model")] + [
        pl.when(pl.col(key) != "").then(pl.lit(f"{_LABELS[key]}=") + pl.col(key)) for key in CONFIG_KEYS
    ]
    return pl.concat_str(parts, separator=" ", ignore_nulls=True)
