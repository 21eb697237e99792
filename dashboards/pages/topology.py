"""Topology page (``/ui/topology``): the service graph of a window from the per-minute service-graph rollup,
drawn with dash-cytoscape (nodes sized by calls, edges colored by error rate or p95); clicking an edge lists
example traces of that call, each linking to its trace page."""

from __future__ import annotations

import dash_cytoscape as cyto
from dash import Dash, Input, Output, State, dcc, html, no_update
from dash.development.base_component import Component

from dashboards.controls import chosen_rollup_window, radio_field, window_controls, window_inputs
from dashboards.format import format_time_ns
from dashboards.pages import Page
from dashboards.tenancy import read_tenant
from dashboards.topology_figures import ColorBy, cytoscape_elements, cytoscape_layout, cytoscape_stylesheet
from query.service import QueryService
from storage.clickhouse import StorageError

EXAMPLES = 10
"""Example traces listed for a clicked edge."""
_HINT = "Click an edge to list example traces of that call."


def layout(**_query: str) -> Component:
    """Controls, the graph beside the edge detail panel; callbacks fill them."""
    controls = window_controls(
        "topology",
        radio_field("Edge color", "topology-color-by", {"error_rate": "Error rate", "p95": "p95"}, "error_rate"),
    )
    return html.Div(
        className="hs-page hs-topology",
        children=[
            controls,
            html.Div(
                className="hs-trace-body",
                children=[
                    html.Section(
                        className="hs-card hs-timeline",
                        children=[
                            # Nothing above the graph changes height once it is drawn: cytoscape caches its
                            # container's position, and a shift would offset every click on an edge.
                            cyto.Cytoscape(
                                id="topology-graph",
                                elements=[],
                                layout=cytoscape_layout(),
                                stylesheet=cytoscape_stylesheet(),
                                style={"width": "100%", "height": "640px"},
                                minZoom=0.2,
                                maxZoom=3,
                            ),
                            html.Div(id="topology-summary", className="hs-results-header"),
                            html.Div(id="topology-message", className="hs-message", role="alert"),
                        ],
                    ),
                    html.Aside(
                        id="topology-edge-detail",
                        className="hs-card hs-span-detail",
                        children=html.P(_HINT, className="hs-hint"),
                    ),
                ],
            ),
            dcc.Store(id="topology-window"),
        ],
    )


def register_callbacks(app: Dash, query: QueryService) -> None:
    """Wire the page to the query room's service graph (:func:`query.topology.window_topology`, as the REST API's)."""

    @app.callback(
        Output("topology-graph", "elements"),
        Output("topology-graph", "layout"),
        Output("topology-summary", "children"),
        Output("topology-window", "data"),
        Output("topology-message", "children"),
        *window_inputs("topology", "color-by"),
    )
    def load(
        lookback: str | None, color_by: str | None, _clicks: int | None
    ) -> tuple[list[dict], dict, str, list[int] | None, str]:
        tenant = read_tenant()
        try:
            start, end, _step = chosen_rollup_window(query.store, lookback, tenant)
            graph = query.topology(start, end, tenant=tenant)
            nodes, edges = graph.nodes, graph.edges
        except (StorageError, ValueError) as exc:
            return [], cytoscape_layout(), "", None, str(exc)
        scheme: ColorBy = "p95" if color_by == "p95" else "error_rate"
        summary = f"{nodes.height} nodes · {edges.height} edges · {format_time_ns(start)} – {format_time_ns(end)}"
        return cytoscape_elements(nodes, edges, scheme), cytoscape_layout(), summary, [start, end], ""

    @app.callback(
        Output("topology-edge-detail", "children"),
        Input("topology-graph", "tapEdgeData"),
        State("topology-window", "data"),
        prevent_initial_call=True,
    )
    def show_edge(edge: dict | None, window: list[int] | None) -> Component | object:
        if not edge or not window:
            return no_update
        try:
            examples = query.store.edge_examples(
                edge["source"], edge["target"], window[0], window[1], tenant=read_tenant(), limit=EXAMPLES
            )
        except (StorageError, ValueError) as exc:
            return html.P(str(exc), className="hs-message")
        items = [
            html.Li(
                className="hs-edge-example",
                children=[
                    dcc.Link(
                        row["trace_id"][:16],
                        href=app.get_relative_path(f"/trace/{row['trace_id']}"),
                        className="hs-mono",
                    ),
                    html.Span(f"  {_duration(row)}{'  error' if row['failed'] else ''}", className="hs-hint"),
                ],
            )
            for row in examples.iter_rows(named=True)
        ]
        facts = [
            ("Calls", f"{edge['calls']:,}"),
            ("Errors", f"{edge['errors']:,} ({edge['error_rate']:.1%})"),
            ("Connection", edge["connection_type"]),
            *((name.replace("_ms", ""), _ms(edge.get(name))) for name in ("p50_ms", "p95_ms", "p99_ms")),
        ]
        return [
            html.H3(f"{edge['source']} → {edge['target']}", className="hs-detail-title"),
            html.Table(className="hs-kv", children=[html.Tr([html.Td(k), html.Td(v)]) for k, v in facts]),
            html.H3("Example traces", className="hs-detail-title"),
            html.Ul(items, id="topology-examples")
            if items
            else html.P("No traces in this window.", className="hs-hint"),
        ]


def _duration(row: dict) -> str:
    value = row["client_duration_ns"] if row["client_duration_ns"] is not None else row["server_duration_ns"]
    return "" if value is None else f"{value / 1e6:.1f} ms"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} ms"


PAGE = Page(
    module=__name__,
    path="/topology",
    name="Topology",
    layout=layout,
    register_callbacks=register_callbacks,
    title="Topology · Hotspan",
)
