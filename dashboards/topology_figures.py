"""The service graph as dash-cytoscape elements and stylesheet: pure functions of the node and edge frames,
no I/O.

Inputs are what :func:`query.topology.topology_nodes` and
:meth:`storage.rollup_reader.RollupReader.service_graph` return. Nodes are sized by calls (square-root scale,
so area follows calls); edges are colored by error rate or by p95 latency on a green → amber → red scale and
widened by calls. Layout is the dagre extension shipped with dash-cytoscape (:func:`cytoscape_layout`); no layout
code here. Edge labels show on the selected edge only, so a busy graph stays readable.
"""

from __future__ import annotations

import math
from typing import Literal

import polars as pl

from dashboards.colors import ERROR_COLOR, NEUTRAL_COLOR, SERVICE_PALETTE

ColorBy = Literal["error_rate", "p95"]

NODE_COLORS = {
    "service": SERVICE_PALETTE[0],
    "user": "#6b7280",
    "database": SERVICE_PALETTE[2],
    "messaging": SERVICE_PALETTE[3],
    "virtual": NEUTRAL_COLOR,
}
"""Node fill by kind (``query.topology.NODE_KINDS``)."""

NODE_SHAPES = {
    "service": "round-rectangle",
    "user": "ellipse",
    "database": "barrel",
    "messaging": "diamond",
    "virtual": "round-rectangle",
}

GOOD_COLOR = "#59a14f"
WARN_COLOR = "#edc948"
MIN_NODE_PX, MAX_NODE_PX = 28.0, 90.0
MIN_EDGE_PX, MAX_EDGE_PX = 1.5, 9.0
ERROR_RATE_RED = 0.05
"""Error rate (0..1) drawn fully red; 0 is green, half of it amber."""
P95_RED_MS = 1_000.0
"""p95 (ms) drawn fully red on a log scale from 1 ms (green); amber around 30 ms."""


def edge_id(source: str, target: str, connection_type: str) -> str:
    """The element ID of an edge (unique per source, target and connection type)."""
    return f"{source}→{target}|{connection_type}"


def cytoscape_elements(nodes: pl.DataFrame, edges: pl.DataFrame, color_by: ColorBy = "error_rate") -> list[dict]:
    """Nodes then edges as cytoscape element dicts.

    Node ``data``: ``id``, ``label`` (name and calls), ``kind``, ``calls``, ``errors``, ``size`` (px), ``color``,
    ``shape``. Edge ``data``: ``id`` (:func:`edge_id`), ``source``, ``target``, ``connection_type``, ``calls``,
    ``errors``, ``error_rate``, ``p50_ms``/``p95_ms``/``p99_ms`` (client-seen, else server-seen; None when
    unknown), ``label``, ``color``, ``width`` (px).

    Args:
        nodes: ``id``, ``kind``, ``calls``, ``errors_in``.
        edges: ``client``, ``server``, ``connection_type``, ``calls``, ``errors``, ``client_p50_ns``...,
            ``server_p50_ns``... (Float64 ns, null when unknown).
        color_by: ``error_rate`` or ``p95``.
    """
    most_node_calls = max([int(c) for c in nodes["calls"]] or [0]) or 1
    most_edge_calls = max([int(c) for c in edges["calls"]] or [0]) or 1
    elements: list[dict] = []
    for row in nodes.iter_rows(named=True):
        kind = row["kind"]
        elements.append(
            {
                "data": {
                    "id": row["id"],
                    "label": f"{row['id']}\n{row['calls']} calls",
                    "kind": kind,
                    "calls": int(row["calls"]),
                    "errors": int(row["errors_in"]),
                    "size": _scale(row["calls"], most_node_calls, MIN_NODE_PX, MAX_NODE_PX),
                    "color": NODE_COLORS.get(kind, NEUTRAL_COLOR),
                    "shape": NODE_SHAPES.get(kind, "round-rectangle"),
                },
                "classes": kind,
            }
        )
    for row in edges.iter_rows(named=True):
        quantiles = edge_quantiles_ms(row)
        calls = int(row["calls"])
        error_rate = row["errors"] / calls if calls else 0.0
        color = error_rate_color(error_rate) if color_by == "error_rate" else latency_color(quantiles[1])
        p95_text = "–" if quantiles[1] is None else f"{quantiles[1]:.1f} ms"
        elements.append(
            {
                "data": {
                    "id": edge_id(row["client"], row["server"], row["connection_type"]),
                    "source": row["client"],
                    "target": row["server"],
                    "connection_type": row["connection_type"],
                    "calls": calls,
                    "errors": int(row["errors"]),
                    "error_rate": error_rate,
                    "p50_ms": quantiles[0],
                    "p95_ms": quantiles[1],
                    "p99_ms": quantiles[2],
                    "label": f"{calls} · {error_rate:.0%} err · p95 {p95_text}",
                    "color": color,
                    "width": _scale(calls, most_edge_calls, MIN_EDGE_PX, MAX_EDGE_PX),
                },
                "classes": row["connection_type"],
            }
        )
    return elements


def edge_quantiles_ms(row: dict) -> tuple[float | None, float | None, float | None]:
    """``(p50, p95, p99)`` in ms of an edge row: the client side's when it has client spans, else the
    server side's."""
    side = "client" if row.get("client_p50_ns") is not None else "server"
    values = [row.get(f"{side}_{q}_ns") for q in ("p50", "p95", "p99")]
    return tuple(None if v is None or math.isnan(v) else round(v / 1e6, 3) for v in values)  # type: ignore[return-value]


def error_rate_color(error_rate: float) -> str:
    """Green at 0, amber at half of :data:`ERROR_RATE_RED`, red from it on."""
    return _traffic_light(min(max(error_rate, 0.0) / ERROR_RATE_RED, 1.0))


def latency_color(p95_ms: float | None) -> str:
    """Green at <= 1 ms, red at >= :data:`P95_RED_MS`, log scale between; neutral when unknown."""
    if p95_ms is None:
        return NEUTRAL_COLOR
    position = math.log10(max(p95_ms, 1.0)) / math.log10(P95_RED_MS)
    return _traffic_light(min(position, 1.0))


def cytoscape_stylesheet() -> list[dict]:
    """Styles reading the element data set by :func:`cytoscape_elements`."""
    return [
        {
            "selector": "node",
            "style": {
                "label": "data(label)",
                "width": "data(size)",
                "height": "data(size)",
                "background-color": "data(color)",
                "shape": "data(shape)",
                "text-wrap": "wrap",
                "text-valign": "bottom",
                "text-margin-y": 4,
                "font-size": 11,
                "color": "#1f2328",
                "border-width": 1,
                "border-color": "#ffffff",
            },
        },
        {"selector": "node.virtual", "style": {"border-style": "dashed", "border-color": "#6b7280", "border-width": 2}},
        {
            "selector": "edge",
            "style": {
                "curve-style": "bezier",
                "target-arrow-shape": "triangle",
                "line-color": "data(color)",
                "target-arrow-color": "data(color)",
                "width": "data(width)",
                "font-size": 10,
                "color": "#4b5563",
                "text-rotation": "autorotate",
                "text-background-color": "#ffffff",
                "text-background-opacity": 0.8,
            },
        },
        {"selector": "edge.messaging", "style": {"line-style": "dashed"}},
        {"selector": "edge.virtual", "style": {"line-style": "dotted"}},
        {"selector": "edge:selected", "style": {"label": "data(label)"}},
        {"selector": ":selected", "style": {"overlay-color": "#5c6bc0", "overlay-opacity": 0.25}},
    ]


def cytoscape_layout() -> dict:
    """dagre's layered layout, left to right: callers left of the services they call, so an edge rarely
    crosses a node (``breadthfirst`` puts siblings in one row and draws calls between them through others)."""
    return {"name": "dagre", "rankDir": "LR", "nodeSep": 40, "rankSep": 110, "edgeSep": 12, "animate": False}


def _scale(value: float, largest: float, low: float, high: float) -> float:
    """``low``..``high`` px by the square root of ``value / largest``."""
    return round(low + (high - low) * math.sqrt(max(float(value), 0.0) / largest), 1)


def _traffic_light(position: float) -> str:
    """Green (0) → amber (0.5) → red (1), interpolated in RGB."""
    if position <= 0.5:
        return _mix(GOOD_COLOR, WARN_COLOR, position * 2)
    return _mix(WARN_COLOR, ERROR_COLOR, (position - 0.5) * 2)


def _mix(start: str, end: str, fraction: float) -> str:
    a = [int(start[i : i + 2], 16) for i in (1, 3, 5)]
    b = [int(end[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * fraction):02x}" for x, y in zip(a, b, strict=True))
