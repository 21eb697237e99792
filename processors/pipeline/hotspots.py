"""Hotspot flags of analysed spans, from three sources, columnar.

A span is a hotspot when (first reason that holds):

1. ``static``: its duration is strictly over the threshold of the first static rule matching its
   (service, operation) (:mod:`processors.pipeline.hotspot_rules`);
2. ``p95``: its duration is strictly over the rolling quantile of its (service, operation): the quantile of
   the durations of that operation's spans in the window before the batch's newest span, computed in
   ClickHouse (``storage.analysis_store.AnalysisStore.duration_quantiles``), for operations with enough spans;
3. ``sdk``: Hotspan's SDK ``HotspotSpanProcessor`` flagged it (``hotspan.hotspot=true`` in its attributes;
   its threshold is the span's ``hotspan.hotspot.threshold_ms``).

Rules are evaluated once per distinct (service, operation), not once per span.
"""

from __future__ import annotations

import polars as pl

from analysis.spans import attribute
from analysis.stage_rules import glob_regex
from hotspan_sdk.attributes import HOTSPOT, HOTSPOT_THRESHOLD_MS
from processors.pipeline.hotspot_rules import HotspotRules
from units import NS_PER_MS

REASONS = ("static", "p95", "sdk")
"""Values of ``HotspotReason`` for a flagged span, in precedence order (``""`` when not flagged)."""
ROLLING_COLUMNS = {"service_name": pl.String, "name": pl.String, "threshold_ns": pl.Float64}


def static_thresholds(pairs: pl.DataFrame, rules: HotspotRules) -> pl.Series:
    """Per row of ``pairs`` (service_name, name), the threshold (Float64 ms) of the first static rule that
    matches it, null where none does."""
    if not rules.static:
        return pl.Series("static_ms", [None] * pairs.height, dtype=pl.Float64)
    hits = (
        pl.when(
            pl.col("service_name").str.contains(glob_regex(rule.service))
            & pl.col("name").str.contains(glob_regex(rule.operation))
        ).then(pl.lit(rule.threshold_ms, dtype=pl.Float64))
        for rule in rules.static
    )
    return pairs.select(pl.coalesce(hits).alias("static_ms")).to_series()


def hotspot_flags(spans: pl.DataFrame, rules: HotspotRules, rolling: pl.DataFrame | None = None) -> pl.DataFrame:
    """Flag every span.

    Args:
        spans: service_name, name (String), duration_ns (Int64 ns), attributes (Map(String, String)), one row
            per span.
        rules: the static rules (the rolling mode's parameters were used to compute ``rolling``).
        rolling: service_name, name, threshold_ns (Float64 ns): the rolling threshold of each operation that
            has one; None or empty when the rolling mode is off or has no data.

    Returns:
        One row per span, in input order: is_hotspot (Boolean), reason (String: one of :data:`REASONS`, ``""``
        when not flagged), threshold_ms (Float64 ms of the crossed threshold; null when not flagged, or for an
        SDK flag that names none).
    """
    pairs = spans.select("service_name", "name").unique(maintain_order=True)
    pairs = pairs.with_columns(static_thresholds(pairs, rules))
    if rolling is not None and rolling.height:
        thresholds = rolling.select(list(ROLLING_COLUMNS)).cast(ROLLING_COLUMNS)
        pairs = pairs.join(thresholds, on=["service_name", "name"], how="left")
    else:
        pairs = pairs.with_columns(pl.lit(None, dtype=pl.Float64).alias("threshold_ns"))
    flagged = spans.select("service_name", "name", "duration_ns", "attributes").join(
        pairs, on=["service_name", "name"], how="left", maintain_order="left"
    )
    duration = pl.col("duration_ns").cast(pl.Float64)
    static = (duration > pl.col("static_ms") * NS_PER_MS).fill_null(False)
    p95 = (duration > pl.col("threshold_ns")).fill_null(False)
    sdk = (attribute(HOTSPOT).str.to_lowercase() == "true").fill_null(False)
    sdk_threshold = attribute(HOTSPOT_THRESHOLD_MS).cast(pl.Float64, strict=False)
    return flagged.select(
        (static | p95 | sdk).alias("is_hotspot"),
        pl.when(static)
        .then(pl.lit("static"))
        .when(p95)
        .then(pl.lit("p95"))
        .when(sdk)
        .then(pl.lit("sdk"))
        .otherwise(pl.lit(""))
        .alias("reason"),
        pl.when(static)
        .then(pl.col("static_ms"))
        .when(p95)
        .then(pl.col("threshold_ns") / NS_PER_MS)
        .when(sdk)
        .then(sdk_threshold)
        .alias("threshold_ms"),
    )
