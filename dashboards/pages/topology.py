"""Topology page (``/ui/topology``): the service graph of a window from the per-minute service-graph rollup,
drawn with dash-cytoscape (nodes sized by calls, edges colored by error rate or p95; services without calls
between them grouped apart); clicking an edge lists example traces of that call, failed then slowest first, each
linking to its trace page, and the search of the calling service in the same window and scope. Clicking a node
focuses the graph on it: the services within the chosen hops of it (the Focus and Hops fields), and its facts and
search beside the graph. Window and scope (a service's calls in and out, an operation's
calls, a request tenant's calls: :class:`storage.rollup_reader.EdgeScope`) live in the URL like the other windowed
pages' (``?lookback=1h&service=frontend``). Below, the Agents card: the agent graph summed over the window's newest
requests (:func:`query.agents.window_agent_graph`, the REST ``/api/v1/agent-graph``)."""

from __future__ import annotations

import dash_cytoscape as cyto
from dash import Dash, Input, Output, State, dcc, html, no_update
from dash.development.base_component import Component

from dashboards.controls import (
    choice_field,
    chosen_rollup_window,
    field,
    page_url,
    radio_field,
    url_output,
    window_inputs,
    window_page,
)
from dashboards.format import format_time_ns
from dashboards.links import search_href
from dashboards.pages import Page
from dashboards.tenancy import read_tenant
from dashboards.topology_figures import (
    ISOLATED_GROUP,
    ColorBy,
    cytoscape_elements,
    cytoscape_layout,
    cytoscape_stylesheet,
    neighbourhood,
)
from dashboards.trace_panels import agent_edges_panel
from processors.pipeline.service_graph import USER
from query.service import QueryService
from query.store import EdgeScope, StorageError, TraceQuery, short_trace_id

EXAMPLES = 10
"""Example traces listed for a clicked edge."""
SCOPE = ("service", "operation", "tenant")
"""The scopes the Topology page takes (:class:`storage.rollup_reader.EdgeScope`; ``tenant`` is the request's)."""
_HINT = "Click an edge to list example traces of that call; click a service to focus on its neighbourhood."
HOPS = {"1": "1 hop", "2": "2 hops", "3": "3 hops", "all": "any"}
"""Focus depth choices: calls away from the focused service, either way."""
DEFAULT_HOPS = "1"
AGENT_TRACES = 100
"""Requests the Agents card sums (the newest of the window): their spans are read and analysed at once."""


def layout(**query: str) -> Component:
    """Window and scope (from the URL), the graph beside the edge detail panel; callbacks fill them."""
    color_by = radio_field("Edge color", "topology-color-by", {"error_rate": "Error rate", "p95": "p95"}, "error_rate")
    focus = field("Focus", dcc.Dropdown(id="topology-focus", placeholder="whole graph", options=[]))
    hops = choice_field("Hops", "topology-hops", HOPS, DEFAULT_HOPS)
    return window_page(
        "topology",
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
                    ],
                ),
                html.Aside(
                    id="topology-edge-detail",
                    className="hs-card hs-span-detail",
                    children=html.P(_HINT, className="hs-hint"),
                ),
            ],
        ),
        html.Section(
            className="hs-card",
            children=[
                html.H3("Agents"),
                html.P(
                    f"Who called which model, tool and agent in the newest {AGENT_TRACES} requests of the window "
                    "(of the service, when one is chosen); marked: on the requests' critical paths.",
                    className="hs-hint",
                ),
                html.Div(id="topology-agents", children=html.P("Loading…", className="hs-hint")),
            ],
        ),
        dcc.Store(id="topology-window"),
        fields=[color_by, focus, hops],
        query=query,
        scopes=SCOPE,
    )


def register_callbacks(app: Dash, query: QueryService) -> None:
    """Wire the page to the query room's service graph (:func:`query.topology.window_topology`, as the REST API's)."""

    @app.callback(
        Output("topology-graph", "elements"),
        Output("topology-graph", "layout"),
        Output("topology-summary", "children"),
        Output("topology-window", "data"),
        Output("topology-message", "children"),
        url_output("topology"),
        Output("topology-focus", "options"),
        *window_inputs("topology", "color-by", *SCOPE),
        Input("topology-focus", "value"),
        Input("topology-hops", "value"),
    )
    def load(
        lookback: str | None,
        color_by: str | None,
        service: str | None,
        operation: str | None,
        request_tenant: str | None,
        _clicks: int | None,
        focus: str | None,
        hops: str | None,
    ) -> tuple[list[dict], dict, str, dict | None, str, str, list[str]]:
        tenant = read_tenant()
        scope = {"service": service, "operation": operation, "tenant": request_tenant}
        url = page_url(lookback, **scope)
        try:
            start, end, _step = chosen_rollup_window(query, lookback, tenant)
            graph = query.topology(start, end, tenant=tenant, scope=_edge_scope(scope))
            nodes, edges = graph.nodes, graph.edges
        except (StorageError, ValueError) as exc:
            return [], cytoscape_layout(), "", None, str(exc), url, []
        scheme: ColorBy = "p95" if color_by == "p95" else "error_rate"
        services = sorted(nodes["id"].to_list())
        whole = nodes.height
        depth = None if hops == "all" else int(hops or DEFAULT_HOPS)
        nodes, edges = neighbourhood(nodes, edges, focus, depth)
        summary = f"{nodes.height} nodes · {edges.height} edges · {format_time_ns(start)} – {format_time_ns(end)}"
        if nodes.height < whole:
            summary += f" · {focus}'s neighbourhood of {whole} nodes (clear Focus for all)"
        if graph.overflow.height:
            summary += f" · the busiest edges only: {int(graph.overflow['calls'][0]):,} more calls on edges beyond"
            summary += " HOTSPAN_CARDINALITY_LIMIT"
        window = {"start": start, "end": end, "lookback": lookback, "scope": scope}
        elements = cytoscape_elements(nodes, edges, scheme, focus)
        return elements, cytoscape_layout(), summary, window, "", url, services

    @app.callback(Output("topology-agents", "children"), Input("topology-window", "data"))
    def agents(window: dict | None) -> Component:
        return _agents(query, window)

    @app.callback(
        Output("topology-focus", "value"),
        Output("topology-edge-detail", "children", allow_duplicate=True),
        Input("topology-graph", "tapNodeData"),
        State("topology-window", "data"),
        prevent_initial_call=True,
    )
    def focus_node(node: dict | None, window: dict | None) -> tuple[object, Component | object]:
        # The grouping box of isolated services is a node too; a click on it is no service.
        if not node or not window or node["id"] == ISOLATED_GROUP:
            return no_update, no_update
        facts = [("Calls", f"{node['calls']:,}"), ("Errors", f"{node['errors']:,}"), ("Kind", node["kind"])]
        search = search_href(
            app.get_relative_path("/").rstrip("/"),
            lookback=window["lookback"],
            service=None if node["id"] == USER else node["id"],
            tenant=window["scope"].get("tenant"),
        )
        detail = [
            html.H3(node["id"], className="hs-detail-title"),
            html.Table(className="hs-kv", children=[html.Tr([html.Td(k), html.Td(v)]) for k, v in facts]),
            html.P(
                "The graph shows its neighbourhood: change Hops, or clear Focus for the whole graph.",
                className="hs-hint",
            ),
            dcc.Link(f"search {node['id']}'s traces, slowest first →", href=search, className="hs-drill"),
        ]
        return node["id"], detail

    @app.callback(
        Output("topology-edge-detail", "children"),
        Input("topology-graph", "tapEdgeData"),
        State("topology-window", "data"),
        prevent_initial_call=True,
    )
    def show_edge(edge: dict | None, window: dict | None) -> Component | object:
        if not edge or not window:
            return no_update
        scope = window["scope"]
        try:
            examples = query.edge_examples(
                edge["source"],
                edge["target"],
                window["start"],
                window["end"],
                tenant=read_tenant(),
                limit=EXAMPLES,
                scope=_edge_scope(scope),
            )
        except (StorageError, ValueError) as exc:
            return html.P(str(exc), className="hs-message")
        items = [
            html.Li(
                className="hs-edge-example",
                children=[
                    dcc.Link(
                        short_trace_id(row["trace_id"], 16),
                        href=app.get_relative_path(f"/trace/{row['trace_id']}"),
                        className="hs-mono",
                    ),
                    html.Span(f"  {_duration(row)}{'  error' if row['failed'] else ''}", className="hs-hint"),
                ],
            )
            for row in examples.iter_rows(named=True)
        ]
        # The search is of spans a service sent: the caller's, unless the caller is the virtual outside user.
        caller = edge["target"] if edge["source"] == USER else edge["source"]
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
            dcc.Link(
                f"search {caller}'s traces, slowest first →",
                id="topology-search",
                href=search_href(
                    app.get_relative_path("/").rstrip("/"),
                    lookback=window["lookback"],
                    service=caller,
                    tenant=scope.get("tenant"),
                ),
                className="hs-drill",
            ),
        ]


def _agents(query: QueryService, window: dict | None) -> Component:
    """The agent graph summed over the window's newest :data:`AGENT_TRACES` requests (of its service scope)."""
    if not window:
        return html.P("No window.", className="hs-hint")
    scope = window.get("scope") or {}
    found = TraceQuery(
        service=scope.get("service") or None,
        operation=scope.get("operation") or None,
        start_ns=int(window["start"]),
        end_ns=int(window["end"]),
        limit=AGENT_TRACES,
    )
    try:
        graph = query.agent_graph(found, tenant=read_tenant())
    except (StorageError, ValueError) as exc:
        return html.P(f"Cannot read the agent graph: {exc}", className="hs-hint")
    panel = agent_edges_panel(graph.edges, "topology-agents-body", "in this window's requests")
    return html.Div([html.P(f"{graph.traces:,} requests", className="hs-hint"), panel])


def _edge_scope(scope: dict[str, str | None]) -> EdgeScope:
    """The page's scope fields as the reader's :class:`EdgeScope`."""
    return EdgeScope(service=scope.get("service"), operation=scope.get("operation"), request_tenant=scope.get("tenant"))


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
