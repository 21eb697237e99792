"""Pure builders of the Topology and Services pages, tested without a browser."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from dash import html

from dashboards.figures import ERROR_COLOR, NEUTRAL_COLOR
from dashboards.services_figures import (
    MAX_LINES,
    SPARKLINE_STYLE,
    engine_metrics_figure,
    red_latency_figure,
    red_table,
    sparkline_data_uri,
)
from dashboards.topology_figures import (
    GOOD_COLOR,
    ISOLATED_GROUP,
    cytoscape_elements,
    cytoscape_layout,
    cytoscape_stylesheet,
    edge_id,
    error_rate_color,
    latency_color,
    layered_positions,
    neighbourhood,
)
from dashboards.windows import rollup_window
from query.topology import topology_nodes
from units import NS_PER_S as NS

T0 = 1_730_000_000 * NS


def edges_frame(rows: list[tuple[str, str, str, int, int, float | None, float | None]]) -> pl.DataFrame:
    """Edges as the rollup reader returns them from ``(client, server, type, calls, errors, client p95 ms,
    server p95 ms)``; p50 and p99 are p95 halved and doubled."""
    data: dict[str, list] = {name: [] for name in ("client", "server", "connection_type", "calls", "errors")}
    for side in ("client", "server"):
        for q in ("p50", "p95", "p99"):
            data[f"{side}_{q}_ns"] = []
    for client, server, kind, calls, errors, client_ms, server_ms in rows:
        for name, item in zip(
            ("client", "server", "connection_type", "calls", "errors"),
            (client, server, kind, calls, errors),
            strict=True,
        ):
            data[name].append(item)
        for side, ms in (("client", client_ms), ("server", server_ms)):
            for q, factor in (("p50", 0.5), ("p95", 1.0), ("p99", 2.0)):
                data[f"{side}_{q}_ns"].append(None if ms is None else ms * factor * 1e6)
    return pl.DataFrame(
        data,
        schema_overrides={k: pl.Float64 for k in data if k.endswith("_ns")} | {"calls": pl.UInt64, "errors": pl.UInt64},
    )


EDGES = edges_frame(
    [
        ("user", "gateway", "virtual", 100, 0, None, 120.0),
        ("gateway", "engine", "plain", 100, 10, 110.0, 100.0),
        ("gateway", "pg", "database", 10, 0, 2.0, None),
    ]
)


def test_nodes_are_sized_by_calls_and_typed_by_kind() -> None:
    nodes = topology_nodes(EDGES, ["gateway", "engine"])
    elements = cytoscape_elements(nodes, EDGES)
    by_id = {e["data"]["id"]: e["data"] for e in elements}
    assert by_id["pg"]["kind"] == "database" and by_id["user"]["kind"] == "user"
    assert by_id["gateway"]["size"] == by_id["engine"]["size"] > by_id["pg"]["size"]
    edge = by_id[edge_id("gateway", "engine", "plain")]
    assert (edge["source"], edge["target"], edge["calls"], edge["error_rate"]) == ("gateway", "engine", 100, 0.1)
    assert edge["p95_ms"] == 110.0  # the caller's view
    assert by_id[edge_id("user", "gateway", "virtual")]["p95_ms"] == 120.0  # no client span: the server's
    assert edge["color"] == ERROR_COLOR  # 10 % errors is past the red end of the scale
    assert by_id[edge_id("gateway", "pg", "database")]["color"] == GOOD_COLOR


def test_edges_colored_by_p95() -> None:
    elements = cytoscape_elements(topology_nodes(EDGES, ["gateway", "engine"]), EDGES, "p95")
    colors = {e["data"]["id"]: e["data"]["color"] for e in elements if "source" in e["data"]}
    assert colors[edge_id("gateway", "pg", "database")] != colors[edge_id("gateway", "engine", "plain")]
    assert latency_color(None) == NEUTRAL_COLOR
    assert latency_color(0.5) == GOOD_COLOR and latency_color(5_000) == ERROR_COLOR
    assert error_rate_color(0.0) == GOOD_COLOR and error_rate_color(1.0) == ERROR_COLOR


def test_stylesheet_and_layout_read_element_data() -> None:
    selectors = {rule["selector"]: rule["style"] for rule in cytoscape_stylesheet()}
    assert selectors["node"]["width"] == "data(size)" and selectors["edge"]["line-color"] == "data(color)"
    assert cytoscape_layout()["name"] == "preset"
    nodes = topology_nodes(EDGES, ["gateway", "engine"])
    positions = {e["data"]["id"]: e["position"] for e in cytoscape_elements(nodes, EDGES) if "position" in e}
    assert set(positions) == set(nodes["id"])
    assert positions["gateway"]["x"] < positions["engine"]["x"]


def test_layers_put_callers_left_of_what_they_call_and_survive_cycles() -> None:
    edges = [("user", "gateway"), ("gateway", "agent"), ("agent", "engine"), ("agent", "pg"), ("gateway", "pg")]
    edges += [("engine", "agent"), ("pg", "pg"), ("agent", "nowhere")]  # a cycle, a self-call, an unknown node
    nodes = ["pg", "engine", "agent", "gateway", "user", "lonely"]
    at = layered_positions(nodes, edges)
    assert set(at) == set(nodes)
    assert at["user"][0] < at["gateway"][0] < at["agent"][0] < at["engine"][0]
    assert at["pg"][0] == at["engine"][0]  # one layer right of its furthest caller
    assert at["user"][0] == at["lonely"][0] == 0.0
    same_layer = [at[node][1] for node in nodes if at[node][0] == at["pg"][0]]
    assert len(set(same_layer)) == len(same_layer)  # no two nodes on one spot


def test_sparkline_is_an_svg_polyline_per_point() -> None:
    uri = sparkline_data_uri([1, None, 3, 2])
    svg = base64.b64decode(uri.removeprefix("data:image/svg+xml;base64,")).decode()
    assert svg.startswith("<svg") and svg.count(",") == 4
    assert sparkline_data_uri([]).startswith("data:image/svg+xml;base64,")


def red_frames(groups: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    services = [f"svc{i}" for i in range(groups)]
    totals = pl.DataFrame({"service": services, "calls": list(range(groups, 0, -1)), "errors": [0] * groups})
    totals = totals.with_columns(p50_ns=pl.lit(1e6), p95_ns=pl.lit(5e6), p99_ns=pl.lit(9e6))
    series = pl.DataFrame(
        {
            "service": [s for s in services for _ in range(3)],
            "bucket_start_ns": [T0 + m * 60 * NS for _ in services for m in range(3)],
            "calls": [1, 2, 3] * groups,
            "p95_ns": [4e6, 5e6, 6e6] * groups,
        }
    )
    return totals, series


def test_red_latency_figure_draws_the_busiest_groups() -> None:
    totals, series = red_frames(MAX_LINES + 3)
    figure = red_latency_figure(totals, series, (T0, T0 + 180 * NS))
    assert [trace.name for trace in figure.data] == [f"svc{i}" for i in range(MAX_LINES)]
    assert list(figure.data[0].y) == [4.0, 5.0, 6.0]
    empty = red_latency_figure(totals.clear(), series.clear(), (T0, T0))
    assert empty.layout.annotations[0].text == "No spans in this window"


def test_red_table_lists_groups_busiest_first() -> None:
    totals, series = red_frames(2)
    table = red_table(totals, series, window_s=60)
    assert isinstance(table, html.Table)
    rows = table.children[1].children
    assert [row.children[0].children for row in rows] == ["svc0", "svc1"]
    assert rows[0].children[2].children == "2.00/min"  # 2 calls over 60 s
    assert rows[0].children[5].children == "5.0"  # p95 in ms
    header = table.children[0].children.children
    assert header[2].children == "Rate (window avg)"
    assert header[2].title == "Calls per second, minute, hour or day, averaged over the selected window (1 min)"
    # A few calls over all stored time read per day, not as 2.44e-07 per second (issue 31).
    rare = red_table(totals, series, window_s=2 / 2.44e-07).children[1].children
    assert rare[0].children[2].children == "0.0211/day"


def test_red_table_sparklines_fit_their_cells() -> None:
    # Fixed 120 px images stuck out of the card: the images take their cell's width and the SVG stretches.
    totals, series = red_frames(1)
    cells = red_table(totals, series, window_s=60).children[1].children[0].children
    images = [cell.children for cell in cells[-2:]]
    assert [image.alt for image in images] == ["calls", "p95"]
    assert all(image.style == SPARKLINE_STYLE and image.style["width"] == "100%" for image in images)
    svg = base64.b64decode(images[0].src.removeprefix("data:image/svg+xml;base64,")).decode()
    assert 'preserveAspectRatio="none"' in svg and 'vector-effect="non-scaling-stroke"' in svg


def test_red_latency_figure_centres_a_single_bucket() -> None:
    # A 9 s run: one one-minute bucket per group in a one-minute window. Each point sits mid-bucket with a
    # marker that is not clipped, rather than half-hidden on the left edge.
    totals, series = red_frames(2)
    series = series.filter(pl.col("bucket_start_ns") == T0)
    figure = red_latency_figure(totals, series, (T0, T0 + 60 * NS), step_s=60)
    start, end = (datetime.fromisoformat(str(bound)) for bound in figure.layout.xaxis.range)
    for trace in figure.data:
        (x,) = trace.x
        assert x - start == end - x == timedelta(seconds=30)
        assert trace.cliponaxis is False and trace.marker.size >= 8 and "markers" in trace.mode
        assert list(trace.customdata) == [_hhmm(T0) + "–" + _hhmm(T0 + 60 * NS)]


def _hhmm(ns: int) -> str:
    return datetime.fromtimestamp(ns / NS, tz=UTC).strftime("%H:%M")


def test_engine_metrics_figure_has_four_panels_on_the_window() -> None:
    engine = pl.DataFrame(
        {
            "series": ["waiting", "kv_cache_usage", "prefix_cache_hit", "ttft_p50_s", "ttft_p95_s"],
            "time_ns": [T0] * 5,
            "value": [3.0, 0.5, 0.25, 0.1, 0.2],
        }
    )
    figure = engine_metrics_figure(engine, (T0, T0 + 60 * NS))
    assert [a.text for a in figure.layout.annotations] == [
        "Requests waiting (peak per step)",
        "KV-cache usage (%, peak per step)",
        "Prefix-cache hit rate (%)",
        "TTFT (ms)",
    ]
    assert {trace.name: trace.y[0] for trace in figure.data} == {
        "waiting": 3.0,
        "usage": 50.0,
        "hit rate": 25.0,
        "TTFT p50": 100.0,
        "TTFT p95": 200.0,
    }
    assert engine_metrics_figure(engine.clear(), (T0, T0)).layout.annotations[0].text.startswith("Prometheus has no")


@pytest.mark.parametrize(
    ("lookback", "stored", "expected"),
    [
        ("1h", None, (T0 - 3600 * NS, T0, 60)),
        ("24h", None, (T0 - 86_400 * NS, T0, 1440)),
        ("all", (T0 - 600 * NS, T0 - 60 * NS), (T0 - 600 * NS, T0 - 60 * NS, 60)),
        ("all", None, (T0 - 3600 * NS, T0, 60)),
        ("bogus", (T0 - 120 * NS, T0), (T0 - 120 * NS, T0, 60)),
    ],
)
def test_rollup_window(lookback: str, stored: tuple[int, int] | None, expected: tuple[int, int, int]) -> None:
    assert rollup_window(lookback, T0, stored) == expected


def test_neighbourhood_keeps_the_services_within_the_hops_either_way() -> None:
    """A chain a → b → c → d with e calling b: b's one-hop neighbourhood is its callers and callees only."""
    edges = edges_frame(
        [(caller, callee, "", 5, 0, 1.0, 1.0) for caller, callee in (("a", "b"), ("b", "c"), ("c", "d"), ("e", "b"))]
    )
    nodes = topology_nodes(edges, ["a", "b", "c", "d", "e", "lonely"])
    near, near_edges = neighbourhood(nodes, edges, "b", 1)
    assert sorted(near["id"].to_list()) == ["a", "b", "c", "e"]
    assert sorted(zip(near_edges["client"], near_edges["server"], strict=True)) == [("a", "b"), ("b", "c"), ("e", "b")]
    assert sorted(neighbourhood(nodes, edges, "b", 2)[0]["id"].to_list()) == ["a", "b", "c", "d", "e"]
    assert neighbourhood(nodes, edges, "b", None)[0].height == 5  # the connected part: not the lonely one
    assert neighbourhood(nodes, edges, None, 1)[0].height == nodes.height  # no focus: the whole graph
    assert neighbourhood(nodes, edges, "gone", 1)[0].height == nodes.height  # a focus not in this window's graph


def test_services_without_calls_are_grouped_below_the_graph() -> None:
    edges = edges_frame([("gateway", "engine", "", 10, 0, 2.0, 1.0)])
    lonely = [f"batch-{index}" for index in range(9)]
    elements = cytoscape_elements(topology_nodes(edges, ["gateway", "engine", *lonely]), edges, focus="gateway")
    nodes = {element["data"]["id"]: element for element in elements if "source" not in element["data"]}
    group = nodes.pop(ISOLATED_GROUP)
    assert group["classes"] == "group" and group["data"]["label"].startswith("9 services without calls")
    assert all(nodes[name]["data"]["parent"] == ISOLATED_GROUP for name in lonely)
    assert "parent" not in nodes["gateway"]["data"] and "parent" not in nodes["engine"]["data"]
    # In a grid of 3 x 3 below the layered graph, not a column of nine in its first layer.
    graph_bottom = max(nodes[name]["position"]["y"] for name in ("gateway", "engine"))
    assert min(nodes[name]["position"]["y"] for name in lonely) > graph_bottom
    assert len({nodes[name]["position"]["x"] for name in lonely}) == 3
    assert nodes["gateway"]["classes"] == "service focus"
    # One service alone is no group.
    single = cytoscape_elements(topology_nodes(edges, ["gateway", "engine", "batch"]), edges)
    assert all(element["data"].get("parent") is None for element in single)
    assert ISOLATED_GROUP not in {element["data"]["id"] for element in single}
