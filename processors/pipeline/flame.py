"""Flame-graph nodes: a span's node is the path of ``service:operation`` labels from its tree's root to it.

Siblings with the same label share a node (as Jaeger UI's flame graph merges them), and so do spans of
different traces that sit at the same path, which is what makes the aggregated flame graph over many traces.

A path is identified by a 64-bit hash computed without walking it: each span contributes
``label_hash * P**depth`` (mod 2**64), the contributions are summed from the root down by pointer jumping
(:mod:`analysis.ancestry`, so a 15,000-deep chain costs 15 rounds), and the sum is mixed with the depth. Label
hashes are BLAKE2b of the service and operation names' UTF-8 text, so node IDs are the same in every process
and release and can be stored (``hotspan_span_analysis.FlameNode``) and aggregated in ClickHouse.

:func:`flame_graph` turns nodes with their self time into the flat list a Plotly icicle (or any flame graph)
takes: each node's total is its self time plus its children's totals, under one virtual root.
"""

from __future__ import annotations

import hashlib

import numpy as np
import numpy.typing as npt
import polars as pl

from analysis.ancestry import reduce_to_root
from analysis.trace_analysis import TraceAnalysis
from storage.analysis_store import FLAME_NODE_COLUMNS

U64 = npt.NDArray[np.uint64]
_P = np.uint64(0x100000001B3)
"""Odd multiplier of the path polynomial (the 64-bit FNV prime)."""
_DEPTH_SALT = np.uint64(0x9E3779B97F4A7C15)
_HEX_DIGITS = np.array(list("0123456789abcdef"))
ROOT_ID = "root"
"""ID of the virtual root of every :func:`flame_graph`."""
NODE_COLUMNS = FLAME_NODE_COLUMNS
"""Input of :func:`flame_graph`: one row per node (``parent`` 0 for a top-level node)."""


def hex_ids(values: U64) -> npt.NDArray[np.str_]:
    """Node hashes as 16 lowercase hex digits each, without a Python call per value."""
    nibbles = (values.astype(np.uint64)[:, None] >> np.arange(60, -4, -4, dtype=np.uint64)) & np.uint64(15)
    return np.ascontiguousarray(_HEX_DIGITS[nibbles.astype(np.int64)]).view("<U16").ravel()


def _mix(values: U64) -> U64:
    # SplitMix64's finaliser: spreads the polynomial sum over all 64 bits.
    values = values ^ (values >> np.uint64(30))
    values = values * np.uint64(0xBF58476D1CE4E5B9)
    values = values ^ (values >> np.uint64(27))
    values = values * np.uint64(0x94D049BB133111EB)
    return values ^ (values >> np.uint64(31))


def _label_hashes(labels: pl.Series) -> U64:
    distinct = labels.unique()
    digests = {
        text: int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        for text in distinct.to_list()
    }
    return labels.replace_strict(digests, return_dtype=pl.UInt64).to_numpy().astype(np.uint64)


def span_nodes(analysis: TraceAnalysis) -> tuple[U64, U64]:
    """Per span of ``analysis.tree`` (in its order), its node and its parent's node (0 for a root).

    Paths follow the resolved tree (:mod:`analysis.tree`): an orphan starts a path of its own.
    """
    tree = analysis.tree
    if not tree.size:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint64)
    spans = tree.spans
    # Hashed with a separator no name contains, so ("a:b", "c") and ("a", "b:c") stay apart.
    labels = spans.select(pl.concat_str("service_name", pl.lit("\x1f"), "name").alias("label")).to_series()
    depth = tree.depth.astype(np.uint64)
    with np.errstate(over="ignore"):
        contribution = _label_hashes(labels) * np.power(_P, depth)
        path = reduce_to_root(tree.parent, contribution, np.add)
        node = _mix(path ^ (depth * _DEPTH_SALT))
    parent = np.where(tree.parent >= 0, node[np.maximum(tree.parent, 0)], np.uint64(0))
    return node, parent.astype(np.uint64)


def trace_nodes(analysis: TraceAnalysis) -> pl.DataFrame:
    """The nodes of every span of ``analysis`` grouped, with :data:`NODE_COLUMNS` (self time summed)."""
    node, parent = span_nodes(analysis)
    tree = analysis.tree
    frame = pl.DataFrame(
        {
            "node": node,
            "parent": parent,
            "depth": tree.depth.astype(np.uint32),
            "service_name": tree.spans["service_name"],
            "name": tree.spans["name"],
            "self_ns": analysis.self_time_ns.astype(np.uint64),
        }
    )
    return (
        frame.group_by("node", maintain_order=True)
        .agg(
            pl.col("parent", "depth", "service_name", "name").first(),
            pl.col("self_ns").sum(),
            pl.len().alias("count"),
        )
        .cast(NODE_COLUMNS)
    )


def flame_graph(nodes: pl.DataFrame, root_label: str, root_count: int) -> pl.DataFrame:
    """The flat node list of a flame graph, ready for a Plotly icicle (``ids``, ``parents``, ``values`` with
    ``branchvalues="total"``).

    Args:
        nodes: :data:`NODE_COLUMNS`, one row per node. A node whose parent is not among them hangs under the
            virtual root.
        root_label: label of the virtual root (e.g. ``"all traces"`` or the trace ID).
        root_count: what the root counts (the traces aggregated).

    Returns:
        id (String: 16 hex digits, :data:`ROOT_ID` for the root), parent (String: ``""`` for the root), label
        (``service:operation``), service_name, name (String), depth (UInt32: 0 for the root, 1 for top-level
        nodes), self_ns (UInt64 ns of self time of the node's spans), total_ns (UInt64: self_ns plus the
        children's total_ns, so a child never outweighs its parent), count (UInt64: spans; traces for the
        root). Root first, then by depth, then heaviest first.
    """
    nodes = nodes.select(list(NODE_COLUMNS)).cast(NODE_COLUMNS)
    rows = nodes.select(pl.col("node").alias("parent")).with_row_index("parent_row")
    parent_row = (
        nodes.select("parent")
        .join(rows, on="parent", how="left", maintain_order="left")["parent_row"]
        .cast(pl.Int64)
        .fill_null(-1)
        .to_numpy()
    )
    level = nodes["depth"].to_numpy().astype(np.int64)
    totals = nodes["self_ns"].to_numpy().astype(np.uint64)
    # Children before parents: a node's depth is its parent's plus one, so deepest levels first, one level
    # per step (a sort, then slices: linear in the nodes even for a 15,000-deep chain).
    order = np.argsort(-level, kind="stable")
    order = order[parent_row[order] >= 0]
    for child in np.split(order, np.flatnonzero(np.diff(level[order])) + 1):
        np.add.at(totals, parent_row[child], totals[child])
    top = parent_row < 0
    node_ids = hex_ids(nodes["node"].to_numpy())
    body = pl.DataFrame(
        {
            "id": node_ids,
            "parent": np.where(top, ROOT_ID, node_ids[np.maximum(parent_row, 0)] if node_ids.size else ROOT_ID),
            "label": nodes.select(pl.concat_str("service_name", pl.lit(":"), "name")).to_series(),
            "service_name": nodes["service_name"],
            "name": nodes["name"],
            "depth": (level + 1).astype(np.uint32),
            "self_ns": nodes["self_ns"],
            "total_ns": totals,
            "count": nodes["count"],
        },
        schema_overrides={"id": pl.String, "parent": pl.String, "label": pl.String},
    )
    root = pl.DataFrame(
        {
            "id": [ROOT_ID],
            "parent": [""],
            "label": [root_label],
            "service_name": [""],
            "name": [""],
            "depth": pl.Series([0], dtype=pl.UInt32),
            "self_ns": pl.Series([0], dtype=pl.UInt64),
            "total_ns": pl.Series([int(totals[top].sum())], dtype=pl.UInt64),
            "count": pl.Series([root_count], dtype=pl.UInt64),
        }
    )
    return pl.concat([root, body.sort(["depth", "total_ns", "id"], descending=[False, True, False])])
