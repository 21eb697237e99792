"""Admission tiers of requests (P0, P1 ... from a span attribute), and their latency and drops per tier.

What ``admission_tier_starvation`` judges and the Services page shows: a request's tier is the value of the first
of :attr:`TierSettings.keys` on the shallowest span of its trace that carries one (its entry span); tiers rank by
:attr:`TierSettings.order` (named tiers, most urgent first, case-insensitive), else by the number in the value
(``P0`` before ``P1``; vLLM: a lower ``priority`` is served first); a value with neither is left out. The request's
latency is that span's duration; it is *dropped* when the span's status is ``Error``, its HTTP status is one of
:attr:`TierSettings.drop_statuses`, or it carries an event named in :attr:`TierSettings.rejected_event_names`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis import SpanTree
from diagnosis.signals import first_attribute, http_status


@dataclass(frozen=True)
class TierSettings:
    """How to tell a request's tier and whether it was dropped (module docstring)."""

    keys: tuple[str, ...]
    order: tuple[str, ...]
    drop_statuses: tuple[int, ...]
    rejected_event_names: tuple[str, ...]


def tiered_requests(tree: SpanTree, settings: TierSettings) -> pl.DataFrame:
    """One row per trace of ``tree`` with a tier. Columns: trace_id, index (Int64, the entry span, a row of
    ``tree.spans``), service_name, operation (``"<service> <span name>"``), tier (String), rank (Int64, 0 most
    urgent), start_ns, duration_ns (Int64 ns), dropped (Boolean)."""
    frame = tree.spans
    status = pl.col("status_code").fill_null("Unset") if "status_code" in frame.columns else pl.lit("Unset")
    if "event_names" in frame.columns and settings.rejected_event_names:
        events = list(settings.rejected_event_names)
        rejected = pl.col("event_names").list.eval(pl.element().is_in(events)).list.any().fill_null(False)
    else:
        rejected = pl.lit(False)
    named = {name.lower(): rank for rank, name in enumerate(settings.order)}
    tier = pl.col("tier")
    rank = pl.coalesce(
        tier.str.to_lowercase().replace_strict(named, default=None, return_dtype=pl.Int64),
        tier.str.extract(r"(\d+)").cast(pl.Int64, strict=False),
    )
    dropped = (status == "Error") | http_status().is_in(list(settings.drop_statuses)).fill_null(False) | rejected
    return (
        frame.with_columns(
            pl.int_range(pl.len(), dtype=pl.Int64).alias("index"),
            pl.Series("depth", tree.depth.astype(np.int64)),
            pl.Series("start_ns", tree.start_ns),
            pl.Series("duration_ns", tree.end_ns - tree.start_ns),
            first_attribute(settings.keys).str.strip_chars().alias("tier"),
            dropped.alias("dropped"),
        )
        .filter(tier.is_not_null() & (tier != ""))
        .sort("trace_id", "depth", "start_ns")
        .unique("trace_id", keep="first", maintain_order=True)
        .select(
            "trace_id",
            "index",
            "service_name",
            pl.concat_str("service_name", pl.lit(" "), "name").alias("operation"),
            "tier",
            rank.alias("rank"),
            "start_ns",
            "duration_ns",
            "dropped",
        )
        .drop_nulls("rank")
    )


def tier_stats(requests: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """Per tier (and ``by`` columns) of :func:`tiered_requests` rows: ``by``, tier, rank, request_count,
    dropped_count, dropped_share (0..1), latency_ms_p50, latency_ms_p95 (ms, over every request of the tier, the
    dropped ones included), sorted by ``by`` then rank."""
    latency_ms = pl.col("duration_ns") / 1e6
    return (
        requests.group_by(*by, "tier", "rank")
        .agg(
            pl.len().alias("request_count"),
            pl.col("dropped").sum().cast(pl.Int64).alias("dropped_count"),
            pl.col("dropped").mean().alias("dropped_share"),
            latency_ms.quantile(0.5, "linear").alias("latency_ms_p50"),
            latency_ms.quantile(0.95, "linear").alias("latency_ms_p95"),
        )
        .sort(*by, "rank", "tier")
    )
