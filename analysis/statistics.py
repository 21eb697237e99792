"""Per-trace statistics table, as Jaeger UI's Trace Statistics view shows it.

Semantics of jaeger-ui ``packages/jaeger-ui/src/components/TracePage/TraceStatistics/tableValues``: spans are
grouped (by service and operation by default); per group the count, the total, average, minimum and maximum
duration, the same four for self time (:mod:`analysis.self_time`, on the tree as the spans report it, as Jaeger
UI computes it: the wrapper adjuster of :mod:`analysis.wrappers` is not applied here), and ``percent``: the
group's total self time as a percentage of the trace's duration, which Jaeger takes as last span end minus first
span start (every span, every root). Jaeger UI rounds to two decimals for display; the values here are not rounded.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from analysis.self_time import self_times
from analysis.trace_analysis import TraceAnalysis, analyze
from analysis.tree import SpanTree
from units import NS_PER_MS


def trace_statistics(
    spans: pl.DataFrame | SpanTree | TraceAnalysis, group_by: Sequence[str] = ("service_name", "name")
) -> pl.DataFrame:
    """Jaeger UI's Trace Statistics for every trace in ``spans``.

    Args:
        spans: a span frame (contract in :mod:`analysis.spans`), a SpanTree or a TraceAnalysis.
        group_by: span columns to group by within a trace (Jaeger UI: service, operation, or both).

    Returns:
        trace_id, the ``group_by`` columns, count (UInt32), total_ms, avg_ms, min_ms, max_ms, self_total_ms,
        self_avg_ms, self_min_ms, self_max_ms (Float64 **milliseconds**), percent (Float64, self_total as a
        percentage of the trace's duration; null for a zero-length trace). Sorted by trace_id, then
        self_total_ms descending, then the group columns.
    """
    analysis = analyze(spans)
    tree = analysis.reported_tree
    groups = list(group_by)
    frame = tree.spans.select("trace_id", *groups).with_columns(
        # numpy divides exactly (correctly rounded), so 1215000 ns reads 1.215 ms.
        pl.Series("duration_ms", (tree.end_ns - tree.start_ns) / NS_PER_MS),
        pl.Series("self_ms", self_times(tree) / NS_PER_MS),
        pl.Series("start_ns", tree.start_ns),
        pl.Series("end_ns", tree.end_ns),
    )
    trace_ms = (pl.col("end_ns").max() - pl.col("start_ns").min()).over("trace_id") / NS_PER_MS
    table = (
        frame.with_columns(trace_ms.alias("trace_ms"))
        .group_by("trace_id", *groups)
        .agg(
            pl.len().cast(pl.UInt32).alias("count"),
            pl.col("duration_ms").sum().alias("total_ms"),
            pl.col("duration_ms").mean().alias("avg_ms"),
            pl.col("duration_ms").min().alias("min_ms"),
            pl.col("duration_ms").max().alias("max_ms"),
            pl.col("self_ms").sum().alias("self_total_ms"),
            pl.col("self_ms").mean().alias("self_avg_ms"),
            pl.col("self_ms").min().alias("self_min_ms"),
            pl.col("self_ms").max().alias("self_max_ms"),
            pl.col("trace_ms").first(),
        )
    )
    percent = pl.when(pl.col("trace_ms") > 0).then(100 * pl.col("self_total_ms") / pl.col("trace_ms"))
    return (
        table.with_columns(percent.alias("percent"))
        .drop("trace_ms")
        .sort(["trace_id", "self_total_ms", *groups], descending=[False, True, *([False] * len(groups))])
    )
