"""A trace view's flame graph: a tile per span for small traces, merged by path above :data:`MERGE_ABOVE` spans.

Tiles are weighted by self time (:mod:`processors.pipeline.flame`: a tile's width is the self time of its
spans and everything below them, so parallel children never outgrow their parent) on the analysis tree. Merged
tiles are the ``service:operation`` paths Jaeger UI's flame graph merges siblings by; each names its longest
span, which a click opens. At most :data:`MAX_TILES` tiles are kept, the heaviest (a tile never outweighs its
parent, so the kept tiles form a tree).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from processors.pipeline.flame import ROOT_ID, flame_graph, hex_ids, span_nodes, trace_nodes
from query.trace_model import TraceView

MERGE_ABOVE = 2_000
"""Spans above which tiles are merged by path."""
MAX_TILES = 2_500
"""Tiles kept at most (a Plotly icicle draws a few thousand tiles smoothly)."""


def trace_flame(view: TraceView) -> pl.DataFrame:
    """The flame graph of ``view``.

    Returns:
        :func:`processors.pipeline.flame.flame_graph` columns (id, parent, label, service_name, name, depth,
        self_ns, total_ns, count), root first, plus ``span`` (Int64: the tile's span, or the longest span of a
        merged tile; -1 for the root). ``count`` is 1 per tile unless merged.
    """
    analysis = view.analysis
    if view.size > MERGE_ABOVE:
        nodes = trace_nodes(analysis)
        node_of_span = span_nodes(analysis)[0]
    else:
        # One node per span: its index + 1 (0 means "no parent" to flame_graph).
        parent = analysis.tree.parent
        node_of_span = np.arange(1, view.size + 1, dtype=np.uint64)
        nodes = pl.DataFrame(
            {
                "node": node_of_span,
                "parent": np.where(parent >= 0, parent + 1, 0).astype(np.uint64),
                "depth": analysis.tree.depth.astype(np.uint32),
                "service_name": view.spans["service_name"],
                "name": view.spans["name"],
                "self_ns": view.self_ns.astype(np.uint64),
                "count": np.ones(view.size, dtype=np.uint64),
            }
        )
    graph = flame_graph(nodes, view.trace_id, 1)
    # Each tile opens its longest span.
    longest = (
        pl.DataFrame({"id": hex_ids(node_of_span), "duration": view.duration, "span": np.arange(view.size)})
        .sort("duration", descending=True)
        .unique("id", keep="first")
        .select("id", "span")
    )
    graph = graph.join(longest, on="id", how="left", maintain_order="left").with_columns(pl.col("span").fill_null(-1))
    if graph.height > MAX_TILES:
        heaviest = graph.slice(1).sort("total_ns", descending=True).head(MAX_TILES - 1)["id"]
        graph = graph.filter((pl.col("id") == ROOT_ID) | pl.col("id").is_in(heaviest.implode()))
        # Ties at the cut can leave a tile without its parent: drop such tiles until none is left.
        while (orphaned := ~graph["parent"].is_in(graph["id"].implode()) & (graph["id"] != ROOT_ID)).any():
            graph = graph.filter(~orphaned)
    return graph
