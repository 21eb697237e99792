"""Hotspots page (``/ui/hotspots``): (service, operation) ranked by total and by p95 self time over a window,
and the aggregated flame graph of the window's requests weighted by self time."""

from __future__ import annotations

import plotly.graph_objects as go
from dash import Dash, Output, dcc, html
from dash.development.base_component import Component

from dashboards.analysis_figures import aggregated_flame_figure, hotspot_table
from dashboards.controls import section, window_filter, window_inputs, window_page
from dashboards.figures import empty_figure
from dashboards.pages import Page
from dashboards.pages.stages import NO_ANALYSIS, analysis_service
from dashboards.tenancy import read_tenant
from storage.clickhouse import StorageError
from storage.reader import TraceReader

RANKED = 20
"""Rows of each ranking."""
_GRAPH_CONFIG = {"displaylogo": False, "responsive": True}


def layout(**_query: str) -> Component:
    """Window control, the two rankings and the flame graph; the callback fills them."""
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
    )


def register_callbacks(app: Dash, reader: TraceReader) -> None:
    """Fill the page from the app's analysis service for the chosen window and the caller's tenant."""

    @app.callback(
        Output("hotspots-by-total", "children"),
        Output("hotspots-by-p95", "children"),
        Output("hotspots-flame", "figure"),
        Output("hotspots-message", "children"),
        *window_inputs("hotspots"),
    )
    def load(lookback: str | None, _clicks: int | None) -> tuple[Component, Component, go.Figure, str]:
        service = analysis_service()
        if service is None:
            return html.Div(), html.Div(), empty_figure(NO_ANALYSIS), NO_ANALYSIS
        tenant = read_tenant()
        try:
            where, _step_s = window_filter(reader, lookback, tenant)
            report = service.hotspots(where, RANKED, tenant=tenant)
            flame = service.flamegraph(where, tenant=tenant)
        except (StorageError, ValueError) as exc:
            return html.Div(), html.Div(), empty_figure("No data"), str(exc)
        return (
            hotspot_table(report.by_self_time, "self_share"),
            hotspot_table(report.by_p95_self_time, "p95_share"),
            aggregated_flame_figure(flame),
            "",
        )


PAGE = Page(
    module=__name__,
    path="/hotspots",
    name="Hotspots",
    layout=layout,
    register_callbacks=register_callbacks,
    title="Hotspots · Hotspan",
)
