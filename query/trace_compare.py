"""Two traces side by side: which operations took longer or shorter, which appear in one only, and how each
stage moved.

Spans are matched by their path: the ``service:operation`` labels from their tree's root down to them, as the
flame graph merges them (:func:`processors.pipeline.flame.span_nodes`, on the analysis tree). Per path both traces
give a span count, summed duration and summed self time; a path one trace lacks is a structural difference
(count 0). The stage totals are each trace's stage lane (:attr:`query.trace_model.TraceView.lane`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis import STAGES
from processors.pipeline.flame import hex_ids, span_nodes
from query.trace_model import TraceView

PATH_COLUMNS = {
    "node": pl.String,
    "parent": pl.String,
    "label": pl.String,
    "depth": pl.Int64,
    "count": pl.Int64,
    "duration_ns": pl.Int64,
    "self_ns": pl.Int64,
}


@dataclass(frozen=True)
class TraceComparison:
    """Trace ``a`` against trace ``b``.

    Attributes:
        paths: one row per path of either trace: node (String, the path's 16-hex id), parent (its parent path's,
            ``""`` at a root), label (``service:operation``), depth (Int64, 0 at a root), count_a, count_b
            (Int64 spans), duration_a_ns, duration_b_ns, self_a_ns, self_b_ns (Int64 ns summed over the path's
            spans), delta_ns (duration_b_ns - duration_a_ns); largest change first.
        stages: stage (String), a_ns, b_ns, delta_ns (Int64): each trace's stage-lane totals; stages neither
            trace spent time in are left out.
    """

    a: TraceView
    b: TraceView
    paths: pl.DataFrame
    stages: pl.DataFrame

    @property
    def only_a(self) -> int:
        """Paths trace ``a`` has and ``b`` lacks."""
        return int((self.paths["count_b"] == 0).sum())

    @property
    def only_b(self) -> int:
        """Paths trace ``b`` has and ``a`` lacks."""
        return int((self.paths["count_a"] == 0).sum())


def compare_traces(a: TraceView, b: TraceView) -> TraceComparison:
    """Compare two trace views (module docstring)."""
    paths = _paths(a).join(_paths(b), on="node", how="full", coalesce=True, suffix="_b")
    paths = paths.select(
        "node",
        pl.coalesce("parent", "parent_b").alias("parent"),
        pl.coalesce("label", "label_b").alias("label"),
        pl.coalesce("depth", "depth_b").alias("depth"),
        pl.col("count").fill_null(0).alias("count_a"),
        pl.col("count_b").fill_null(0),
        pl.col("duration_ns").fill_null(0).alias("duration_a_ns"),
        pl.col("duration_ns_b").fill_null(0).alias("duration_b_ns"),
        pl.col("self_ns").fill_null(0).alias("self_a_ns"),
        pl.col("self_ns_b").fill_null(0).alias("self_b_ns"),
    ).with_columns((pl.col("duration_b_ns") - pl.col("duration_a_ns")).alias("delta_ns"))
    paths = paths.sort(pl.col("delta_ns").abs(), "node", descending=[True, False])
    totals_a, totals_b = a.lane.totals_ns, b.lane.totals_ns
    stages = pl.DataFrame(
        {"stage": list(STAGES), "a_ns": totals_a.astype(np.int64), "b_ns": totals_b.astype(np.int64)}
    ).with_columns((pl.col("b_ns") - pl.col("a_ns")).alias("delta_ns"))
    return TraceComparison(a, b, paths, stages.filter((pl.col("a_ns") > 0) | (pl.col("b_ns") > 0)))


def _paths(view: TraceView) -> pl.DataFrame:
    """Per path of ``view``: :data:`PATH_COLUMNS`."""
    node, parent = span_nodes(view.analysis)
    frame = pl.DataFrame(
        {
            "node": hex_ids(node),
            "parent": np.where(parent == 0, "", hex_ids(parent)),
            "label": view.spans.select(pl.concat_str("service_name", pl.lit(":"), "name")).to_series(),
            "depth": view.analysis.tree.depth,
            "duration_ns": view.duration,
            "self_ns": view.self_ns,
        }
    )
    return (
        frame.group_by("node", maintain_order=True)
        .agg(
            pl.col("parent", "label", "depth").first(),
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("duration_ns").sum(),
            pl.col("self_ns").sum(),
        )
        .cast(PATH_COLUMNS)
    )  # type: ignore[arg-type]
