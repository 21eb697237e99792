"""The service graph as dash-cytoscape elements and stylesheet: pure functions of the node and edge frames,
no I/O.

Inputs are what :func:`query.topology.topology_nodes` and
:meth:`storage.rollup_reader.RollupReader.service_graph` return. Nodes are sized by calls (square-root scale,
so area follows calls); edges are colored by error rate or by p95 latency on a green → amber → red scale and
widened by calls. Nodes are placed here, in layers left to right (:func:`layered_positions`), and drawn with
cytoscape's ``preset`` layout: dash-cytoscape's layered layout (dagre) ships only in its extra-layouts bundle, whose
1.4 MB script every page of the UI would load and run (about 200 ms of the browser's main thread per page load,
measured on the trace page) for the one page that draws a graph. Edge labels show on the selected edge only, so a
busy graph stays readable.
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
LAYER_GAP_PX, ROW_GAP_PX = 220.0, 110.0
"""Distance between layers (callers and the services they call) and between nodes of one layer."""
ORDER_SWEEPS = 4
"""Passes of the barycentre ordering that reduces crossings (:func:`layered_positions`)."""
ERROR_RATE_RED = 0.05
"""Error rate (0..1) drawn fully red; 0 is green, half of it amber."""
P95_RED_MS = 1_000.0
"""p95 (ms) drawn fully red on a log scale from 1 ms (green); amber around 30 ms."""
ISOLATED_GROUP = "isolated services"
"""ID of the compound node holding the nodes without an edge in the graph (:func:`cytoscape_elements`)."""
ISOLATED_GAP_PX = 150.0
"""Distance between the grouped isolated nodes, in a grid below the layered graph."""


def neighbourhood(
    nodes: pl.DataFrame, edges: pl.DataFrame, focus: str | None, hops: int | None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The part of a graph within ``hops`` calls of ``focus``, either way (callers and callees alike), and the
    edges between those nodes: what a graph of tens of services is read for when one service is in question.

    Args:
        nodes: ``id`` and the rest, as :func:`cytoscape_elements` takes.
        edges: ``client``, ``server`` and the rest.
        focus: a node ID; None, or one not in ``nodes``, leaves the graph whole.
        hops: how many calls away (>= 1); None for any number (the focus's connected part).

    Returns:
        ``(nodes, edges)`` filtered, rows in their order.
    """
    if not focus or focus not in set(nodes["id"].to_list()):
        return nodes, edges
    neighbours: dict[str, set[str]] = {}
    for client, server in zip(edges["client"], edges["server"], strict=True):
        neighbours.setdefault(client, set()).add(server)
        neighbours.setdefault(server, set()).add(client)
    reached, frontier, depth = {focus}, {focus}, 0
    while frontier and (hops is None or depth < hops):
        frontier = {other for node in frontier for other in neighbours.get(node, ())} - reached
        reached |= frontier
        depth += 1
    kept = list(reached)
    return (
        nodes.filter(pl.col("id").is_in(kept)),
        edges.filter(pl.col("client").is_in(kept) & pl.col("server").is_in(kept)),
    )


def edge_id(source: str, target: str, connection_type: str) -> str:
    """The element ID of an edge (unique per source, target and connection type)."""
    return f"{source}→{target}|{connection_type}"


def cytoscape_elements(
    nodes: pl.DataFrame, edges: pl.DataFrame, color_by: ColorBy = "error_rate", focus: str | None = None
) -> list[dict]:
    """Nodes then edges as cytoscape element dicts.

    Node ``position`` (:func:`layered_positions`, px); node ``data``: ``id``, ``label`` (name and calls),
    ``kind``, ``calls``, ``errors``, ``size`` (px), ``color``, ``shape``. Nodes without an edge are not laid out
    in the layers (each took a row of the first layer, and tens of them made the graph a tall column too small to
    read) but in a grid below, inside one compound node (:data:`ISOLATED_GROUP`, ``parent`` in their ``data``;
    class ``group``, its ``label`` saying how many), when there are two or more. Edge ``data``: ``id``
    (:func:`edge_id`), ``source``, ``target``, ``connection_type``, ``calls``, ``errors``, ``error_rate``,
    ``p50_ms``/``p95_ms``/``p99_ms`` (client-seen, else server-seen; None when unknown), ``label``, ``color``,
    ``width`` (px).

    Args:
        nodes: ``id``, ``kind``, ``calls``, ``errors_in``.
        edges: ``client``, ``server``, ``connection_type``, ``calls``, ``errors``, ``client_p50_ns``...,
            ``server_p50_ns``... (Float64 ns, null when unknown).
        color_by: ``error_rate`` or ``p95``.
        focus: the node the page is focused on (:func:`neighbourhood`), ringed (class ``focus``).
    """
    most_node_calls = max([int(c) for c in nodes["calls"]] or [0]) or 1
    most_edge_calls = max([int(c) for c in edges["calls"]] or [0]) or 1
    pairs = list(zip(edges["client"], edges["server"], strict=True))
    linked = {node for pair in pairs for node in pair}
    ids = nodes["id"].to_list()
    isolated = [node for node in ids if node not in linked] if len(ids) - len(linked & set(ids)) >= 2 else []
    positions = layered_positions([node for node in ids if node not in isolated], pairs)
    positions |= _grid_below(isolated, positions)
    elements: list[dict] = []
    if isolated:
        label = f"{len(isolated)} services without calls between them in this window"
        elements.append({"data": {"id": ISOLATED_GROUP, "label": label}, "classes": "group"})
    for row in nodes.iter_rows(named=True):
        kind = row["kind"]
        x, y = positions[row["id"]]
        data = {
            "id": row["id"],
            "label": f"{row['id']}\n{row['calls']} calls",
            "kind": kind,
            "calls": int(row["calls"]),
            "errors": int(row["errors_in"]),
            "size": _scale(row["calls"], most_node_calls, MIN_NODE_PX, MAX_NODE_PX),
            "color": NODE_COLORS.get(kind, NEUTRAL_COLOR),
            "shape": NODE_SHAPES.get(kind, "round-rectangle"),
        }
        if row["id"] in isolated:
            data["parent"] = ISOLATED_GROUP
        classes = f"{kind} focus" if row["id"] == focus else kind
        elements.append({"position": {"x": x, "y": y}, "data": data, "classes": classes})
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
            "selector": "node.group",
            "style": {
                "shape": "round-rectangle",
                "background-color": "#f4f5f7",
                "border-color": "#c9ced8",
                "border-style": "dashed",
                "text-valign": "top",
                "text-margin-y": -6,
                "font-size": 12,
                "color": "#6b7280",
                "padding": 24,
            },
        },
        {"selector": "node.focus", "style": {"border-color": "#f28e2b", "border-width": 4}},
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
    """Cytoscape's ``preset`` layout: nodes where :func:`cytoscape_elements` placed them, the graph fitted."""
    return {"name": "preset", "fit": True, "padding": 30, "animate": False}


def layered_positions(nodes: list[str], edges: list[tuple[str, str]]) -> dict[str, tuple[float, float]]:
    """Each node's ``(x, y)`` in px, left to right in layers, as dagre does (Sugiyama's method): calls that close a
    cycle are set aside (a depth-first search's back edges, searching from the nodes nobody calls), every node
    then sits one layer right of its furthest caller (longest path), and each layer is ordered by the mean row
    of its callers, :data:`ORDER_SWEEPS` times, so edges rarely cross. Layers are :data:`LAYER_GAP_PX` apart,
    rows :data:`ROW_GAP_PX`, each layer centred on y = 0.

    Args:
        nodes: node IDs (graphs of tens of nodes: plain Python is fine here).
        edges: ``(caller, callee)`` pairs; pairs naming an unknown node, repeats and self-calls are ignored.
    """
    known = set(nodes)
    calls: dict[str, list[str]] = {node: [] for node in nodes}
    for caller, callee in dict.fromkeys(edges):
        if caller != callee and caller in known and callee in known:
            calls[caller].append(callee)
    called = {callee for callees in calls.values() for callee in callees}
    forward = _acyclic(calls, [node for node in nodes if node not in called] + nodes)
    layer = _longest_path_layers(nodes, forward)
    layers: dict[int, list[str]] = {}
    for node in nodes:
        layers.setdefault(layer[node], []).append(node)
    callers: dict[str, list[str]] = {node: [] for node in nodes}
    for caller, callees in forward.items():
        for callee in callees:
            callers[callee].append(caller)
    row: dict[str, float] = {}
    for _ in range(ORDER_SWEEPS):
        for number in sorted(layers):
            members = layers[number]
            for index, node in enumerate(members):
                above = [row[caller] for caller in callers[node] if caller in row]
                row[node] = sum(above) / len(above) if above else row.get(node, float(index))
            members.sort(key=lambda node: row[node])
            for index, node in enumerate(members):
                row[node] = float(index)
    return {
        node: (layer[node] * LAYER_GAP_PX, (row[node] - (len(layers[layer[node]]) - 1) / 2) * ROW_GAP_PX)
        for node in nodes
    }


def _grid_below(nodes: list[str], placed: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """Positions (px) for ``nodes`` in a near-square grid below the ``placed`` ones, left-aligned with them."""
    if not nodes:
        return {}
    columns = math.ceil(math.sqrt(len(nodes)))
    top = max((y for _x, y in placed.values()), default=-ROW_GAP_PX) + 1.5 * ROW_GAP_PX
    left = min((x for x, _y in placed.values()), default=0.0)
    return {
        node: (left + (index % columns) * ISOLATED_GAP_PX, top + (index // columns) * ROW_GAP_PX)
        for index, node in enumerate(nodes)
    }


def _acyclic(calls: dict[str, list[str]], starts: list[str]) -> dict[str, list[str]]:
    """``calls`` without the edges that close a cycle: a depth-first search from ``starts`` in order (iterative),
    dropping each edge into a node still on its path."""
    forward: dict[str, list[str]] = {node: [] for node in calls}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in starts:
        if start in state:
            continue
        state[start] = 1
        stack = [(start, iter(calls[start]))]
        while stack:
            node, callees = stack[-1]
            callee = next(callees, None)
            if callee is None:
                state[node] = 2
                stack.pop()
            elif state.get(callee) != 1:
                forward[node].append(callee)
                if callee not in state:
                    state[callee] = 1
                    stack.append((callee, iter(calls[callee])))
    return forward


def _longest_path_layers(nodes: list[str], forward: dict[str, list[str]]) -> dict[str, int]:
    """Each node's layer: 0 for a node nobody calls, else one more than its furthest caller's (Kahn's order)."""
    waiting = {node: 0 for node in nodes}
    for callees in forward.values():
        for callee in callees:
            waiting[callee] += 1
    layer = dict.fromkeys(nodes, 0)
    ready = [node for node in nodes if waiting[node] == 0]
    while ready:
        node = ready.pop()
        for callee in forward[node]:
            layer[callee] = max(layer[callee], layer[node] + 1)
            waiting[callee] -= 1
            if waiting[callee] == 0:
                ready.append(callee)
    return layer


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
