"""A window's slow requests against its baseline, in the manner of TraceQL's ``compare()`` and Grafana's Traces
Drilldown: which stages grew, which attribute values the slow requests carry more often.

The window's analysed requests (``AnalysisService.trace_summaries``, newest first, at most :data:`POOL`) split at
a duration quantile: the slowest (``duration >= quantile``) against the rest. Per stage, the mean critical-path
time in each group; per attribute value (root service, root operation, model, request tenant, with an error or
not, whether the request called a model), its share of each group and the difference, largest first.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis import STAGES
from query.analysis_service import AnalysisService
from storage.analysis_store import AnalysisFilter

POOL = 5_000
"""Newest analysed requests of the window compared."""
ATTRIBUTES = {
    "root_service": "root service",
    "root_name": "root operation",
    "model": "model",
    "tenant": "request tenant",
    "has_error": "has an error",
    "calls_model": "calls a model",
}
"""The request attributes compared, with their names for people."""


@dataclass(frozen=True)
class WindowComparison:
    """Slow requests against the baseline.

    Attributes:
        threshold_ns: the duration splitting them (the quantile), ns.
        slow, baseline: requests in each group.
        stages: stage (String), slow_mean_ns, baseline_mean_ns, delta_ns (Float64 ns per request); largest
            growth first; stages neither group spent time in are left out.
        attributes: attribute (String, a key of :data:`ATTRIBUTES`), value (String), slow_share, baseline_share,
            delta (Float64 in [-1, 1]: the share among slow requests minus the share in the baseline); largest
            difference first.
    """

    threshold_ns: int
    slow: int
    baseline: int
    stages: pl.DataFrame
    attributes: pl.DataFrame


def compare_window(
    analysis: AnalysisService, where: AnalysisFilter, *, tenant: str | None, quantile: float = 0.9
) -> WindowComparison | None:
    """Compare the window's slowest requests (at or above the ``quantile`` of duration, in (0, 1)) with the rest;
    None when the window has fewer than two analysed requests or no faster rest.

    Raises:
        ValueError: ``quantile`` outside (0, 1).
    """
    if not 0 < quantile < 1:
        raise ValueError("quantile must lie between 0 and 1")
    return compare_requests(analysis.trace_summaries(where, POOL, tenant=tenant), quantile)


def compare_requests(requests: pl.DataFrame, quantile: float) -> WindowComparison | None:
    """:func:`compare_window` on request summaries already read (``AnalysisService.trace_summaries`` columns:
    duration_ns, error_count, llm_calls, the :data:`ATTRIBUTES` columns and ``<stage>_ns`` per stage)."""
    if requests.height < 2:
        return None
    threshold = int(requests["duration_ns"].quantile(quantile, "higher"))  # type: ignore[arg-type]
    requests = requests.with_columns((pl.col("duration_ns") >= threshold).alias("slow"))
    slow, baseline = int(requests["slow"].sum()), int((~requests["slow"]).sum())
    if not slow or not baseline:
        return None
    stage_columns = [f"{stage}_ns" for stage in STAGES if f"{stage}_ns" in requests.columns]
    means = requests.group_by("slow").agg(pl.col(stage_columns).cast(pl.Float64).mean())
    slow_means = means.filter("slow").drop("slow").row(0, named=True)
    base_means = means.filter(~pl.col("slow")).drop("slow").row(0, named=True)
    stages = (
        pl.DataFrame(
            {
                "stage": [column.removesuffix("_ns") for column in stage_columns],
                "slow_mean_ns": [slow_means[column] for column in stage_columns],
                "baseline_mean_ns": [base_means[column] for column in stage_columns],
            }
        )
        .with_columns((pl.col("slow_mean_ns") - pl.col("baseline_mean_ns")).alias("delta_ns"))
        .filter((pl.col("slow_mean_ns") > 0) | (pl.col("baseline_mean_ns") > 0))
        .sort("delta_ns", descending=True)
    )
    described = requests.with_columns(
        (pl.col("error_count") > 0).alias("has_error"),
        (pl.col("llm_calls") > 0).alias("calls_model"),
    )
    shares = pl.concat(
        [
            described.select(
                pl.lit(name).alias("attribute"), pl.col(name).cast(pl.String).fill_null("(none)").alias("value"), "slow"
            )
            for name in ATTRIBUTES
        ]
    )
    attributes = (
        shares.group_by("attribute", "value")
        .agg(
            (pl.col("slow").sum() / slow).alias("slow_share"),
            ((~pl.col("slow")).sum() / baseline).alias("baseline_share"),
        )
        .with_columns((pl.col("slow_share") - pl.col("baseline_share")).alias("delta"))
        # Largest difference first; of two as large, the value the slow requests carry more often.
        .sort(pl.col("delta").abs(), "delta", "attribute", "value", descending=[True, True, False, False])
    )
    return WindowComparison(threshold, slow, baseline, stages, attributes)
