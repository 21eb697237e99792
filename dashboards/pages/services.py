"""Services page (``/ui/services``): the capacity health score of each vLLM service and engine at the window's end,
RED per service or operation from the per-minute rollup, a table with sparklines, p95 latency over time, latency
and drops per admission tier (P0, P1 ...) of the window's requests, and, when a Prometheus URL is configured,
vLLM's engine metrics for the same window underneath."""

from __future__ import annotations

import plotly.graph_objects as go
from dash import Dash, Input, Output, dcc, html
from dash.development.base_component import Component

from dashboards.capacity_figures import capacity_panel
from dashboards.controls import (
    PERSIST,
    chosen_rollup_window,
    field,
    page_url,
    radio_field,
    section,
    url_output,
    window_inputs,
    window_page,
)
from dashboards.figures import empty_figure
from dashboards.links import drilldown, search_href
from dashboards.pages import Page
from dashboards.services_figures import engine_metrics_figure, red_latency_figure, red_table, tier_table
from dashboards.tenancy import read_tenant
from query.service import QueryService
from query.store import PrometheusError, RedQuery, StorageError, TraceQuery

KIND_OPTIONS = [{"label": "Server spans", "value": "Server"}, {"label": "Consumer spans", "value": "Consumer"}]
KIND_OPTIONS += [{"label": "Client spans", "value": "Client"}, {"label": "All spans", "value": "all"}]
_GRAPH_CONFIG = {"displaylogo": False, "responsive": True}
TIER_TRACES = 2_000
"""Traces the admission-tier table reads, the most recently active first (as a window diagnosis does)."""


SCOPE = ("service", "operation")
"""The scopes the Services page takes (exact span service and name)."""


def layout(**query: str) -> Component:
    """Controls, the capacity panel, the RED table, the latency figure, the tier table and the engine panel;
    callbacks fill them."""
    fields = [
        radio_field("Group by", "services-group-by", {"service": "Service", "operation": "Operation"}, "service"),
        field(
            "Spans",
            dcc.Dropdown(id="services-kind", options=KIND_OPTIONS, value="Server", clearable=False, **PERSIST),
        ),
    ]
    return window_page(
        "services",
        section(
            "Capacity",
            "health score 0-100 per vLLM service and engine, from Prometheus, over the last minutes of the window"
            " (HOTSPAN_CAPACITY_WINDOW_S, default 5)",
            dcc.Loading(html.Div(id="services-capacity"), type="dot"),
        ),
        section(
            "Rate, errors, duration",
            "from the per-minute RED rollup; sparklines: calls and p95",
            dcc.Loading(html.Div(id="services-table"), type="dot"),
        ),
        section(
            "Latency from traces",
            "p95 per step, busiest groups",
            dcc.Graph(id="services-latency", figure=empty_figure("Loading…"), config=_GRAPH_CONFIG),
        ),
        section(
            "Admission tiers",
            "per entry service and tier, from the window's traces: requests, drops (errors, 429/503, rejections), "
            "latency",
            dcc.Loading(html.Div(id="services-tiers"), type="dot"),
        ),
        section(
            "vLLM engine",
            "from Prometheus (HOTSPAN_PROMETHEUS_URL), same window",
            html.Div(id="services-engine"),
        ),
        fields=fields,
        query=query,
        scopes=SCOPE,
    )


def register_callbacks(app: Dash, query: QueryService) -> None:
    """Wire the controls to the query room's capacity scores, RED rollups, admission tiers and engine metrics."""

    # A callback of its own: a slow or failing Prometheus must not hold back the RED table.
    @app.callback(
        Output("services-capacity", "children"),
        Input("services-lookback", "value"),
        Input("services-refresh", "n_clicks"),
    )
    def load_capacity(lookback: str | None, _clicks: int | None) -> Component:
        try:
            _, end, _ = chosen_rollup_window(query, lookback, read_tenant())
        except (StorageError, ValueError) as exc:
            return html.P(str(exc), className="hs-message")
        return capacity_panel(query.capacity.report(end))

    @app.callback(
        Output("services-table", "children"),
        Output("services-latency", "figure"),
        Output("services-tiers", "children"),
        Output("services-engine", "children"),
        Output("services-message", "children"),
        url_output("services"),
        *window_inputs("services", "group-by", "kind", *SCOPE),
    )
    def load(
        lookback: str | None,
        group_by: str | None,
        kind: str | None,
        span_service: str | None,
        operation: str | None,
        _clicks: int | None,
    ) -> tuple[Component, go.Figure, Component, Component, str, str]:
        url = page_url(lookback, service=span_service, operation=operation)
        tenant = read_tenant()
        try:
            start, end, step = chosen_rollup_window(query, lookback, tenant)
            selection = RedQuery(
                "operation" if group_by == "operation" else "service",
                start,
                end,
                step,
                service=(span_service or "").strip() or None,
                operation=(operation or "").strip() or None,
                span_kind=None if kind in (None, "all") else kind,
                limit=query.cardinality_limit,
            )
            result = query.red(selection, tenant=tenant)
            window = TraceQuery(service=selection.service, start_ns=start, end_ns=end, limit=TIER_TRACES)
            tiers = query.diagnosis.tiers(window, tenant=tenant)
        except (StorageError, ValueError) as exc:
            return html.Div(), empty_figure("No data"), html.Div(), html.Div(), str(exc), url
        prefix = app.get_relative_path("/").rstrip("/")

        def drill(row: dict[str, object]) -> Component:
            if row.get("overflow"):
                return html.Span()
            scope = {"service": row.get("service"), "operation": row.get("operation")}
            return drilldown(prefix, [], search_href(prefix, lookback=lookback, **scope))  # type: ignore[arg-type]

        return (
            red_table(result.totals, result.series, (end - start) / 1e9, drill),
            red_latency_figure(result.totals, result.series, (start, end), step),
            tier_table(tiers),
            _engine_panel(query, start, end, step),
            "",
            url,
        )


def _engine_panel(query: QueryService, start_ns: int, end_ns: int, step_s: int) -> Component:
    try:
        frame = query.engine_series(start_ns, end_ns, step_s)
    except PrometheusError as exc:
        return html.P(str(exc), className="hs-message")
    if frame is None:
        return html.P(
            "Set HOTSPAN_PROMETHEUS_URL to a Prometheus that scrapes vLLM to see its queue, KV-cache, prefix-cache"
            " and TTFT metrics here (make demo starts one scraping its stack's engine when the prometheus binary is"
            " installed: make system-deps).",
            className="hs-hint",
        )
    return dcc.Graph(
        id="services-engine-graph", figure=engine_metrics_figure(frame, (start_ns, end_ns)), config=_GRAPH_CONFIG
    )


PAGE = Page(
    module=__name__,
    path="/services",
    name="Services",
    layout=layout,
    register_callbacks=register_callbacks,
    title="Services · Hotspan",
)
