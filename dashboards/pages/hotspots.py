"""Hotspots page (``/ui/hotspots``): (service, operation) ranked by total and by p95 self time over a window,
and the aggregated flame graph of the window's requests weighted by self time."""

from __future__ import annotations

import plotly.graph_objects as go
from dash import Dash, Output, dcc, html
from dash.development.base_component import Component

from dashboards.analysis_figures import aggregated_flame_figure, hotspot_table
from dashboards.controls import page_url, scoped, section, url_output, window_filter, window_inputs, window_page
from dashboards.figures import empty_figure
from dashboards.links import drilldown, search_href
from dashboards.pages import Page
from dashboards.tenancy import read_tenant
from query.drilldown import hotspot_examples
from query.service import QueryService
from query.store import StorageError

RANKED = 20
"""Rows of each ranking."""
_GRAPH_CONFIG = {"displaylogo": False, "responsive": True}


SCOPE = ("service", "operation", "tenant")
"""The scopes the Hotspots page takes: the span's service and operation, the tenant its request names."""


def layout(**query: str) -> Component:
    """Window and scope (from the URL), the two rankings and the flame graph; the callback fills them."""
    return window_page(
        "hotspots",
        section(
            "By total self time",
            "time spent in the operation itself, children excluded",
            dcc.Loading(html.Div(id="hotspots-by-total"), type="dot"),
        ),
        section(
            "By p95 self time",
            "the slowest typical call; share of the summed p95s",
            html.Div(id="hotspots-by-p95"),
        ),
        section(
            "Aggregated flame graph",
            "paths of service:operation, width = self time",
            dcc.Graph(id="hotspots-flame", figure=empty_figure("Loading…"), config=_GRAPH_CONFIG),
        ),
        query=query,
        scopes=SCOPE,
    )


def register_callbacks(app: Dash, query: QueryService) -> None:
    """Fill the page from the app's analysis service for the chosen window and the caller's tenant."""

    @app.callback(
        Output("hotspots-by-total", "children"),
        Output("hotspots-by-p95", "children"),
        Output("hotspots-flame", "figure"),
        Output("hotspots-message", "children"),
        url_output("hotspots"),
        *window_inputs("hotspots", *SCOPE),
    )
    def load(
        lookback: str | None, span_service: str | None, operation: str | None, request_tenant: str | None, _: int | None
    ) -> tuple[Component, Component, go.Figure, str, str]:
        scope = {"service": span_service, "operation": operation, "tenant": request_tenant}
        url = page_url(lookback, **scope)
        service = query.analysis
        tenant = read_tenant()
        try:
            where, _step_s = window_filter(query, lookback, tenant)
            where = scoped(where, **scope)
            report = service.hotspots(where, RANKED, tenant=tenant)
            flame = service.flamegraph(where, tenant=tenant)
            examples = hotspot_examples(service, where, tenant=tenant)
        except (StorageError, ValueError) as exc:
            return html.Div(), html.Div(), empty_figure("No data"), str(exc), url
        prefix = app.get_relative_path("/").rstrip("/")

        def drill(span_service: str, name: str) -> Component:
            search = search_href(prefix, lookback=lookback, service=span_service, operation=name, tenant=request_tenant)
            return drilldown(prefix, examples.get((span_service, name), []), search)

        return (
            hotspot_table(report.by_self_time, "self_share", drill),
            hotspot_table(report.by_p95_self_time, "p95_share", drill),
            aggregated_flame_figure(flame),
            "",
            url,
        )


PAGE = Page(
    module=__name__,
    path="/hotspots",
    name="Hotspots",
    layout=layout,
    register_callbacks=register_callbacks,
    title="Hotspots · Hotspan",
)
