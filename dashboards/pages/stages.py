"""Stages page (``/ui/stages``): where requests' time goes over a window: stage shares of end-to-end latency
over time, p50/p95/p99 per stage with its share, and end-to-end latency, TTFT and TPOT. Reads the trace
pipeline's tables through :class:`processors.pipeline.queries.AnalysisService` (requests quiet for
``trace_idle_s``)."""

from __future__ import annotations

import time

import flask
import plotly.graph_objects as go
from dash import Dash, Input, Output, dcc, html
from dash.development.base_component import Component

from dashboards.analysis_figures import latency_facts, stage_percentile_table, stage_shares_figure
from dashboards.figures import empty_figure
from dashboards.pages import Page
from dashboards.tenancy import read_tenant
from dashboards.windows import DEFAULT_ROLLUP_LOOKBACK, analysis_window, lookback_options
from processors.pipeline.queries import AnalysisService
from storage.analysis_store import AnalysisFilter
from storage.clickhouse import StorageError
from storage.reader import TraceReader
from storage.rollup_reader import RollupReader

ANALYSIS_CONFIG = "HOTSPAN_ANALYSIS"
"""Key of the app's Flask config holding the :class:`~processors.pipeline.queries.AnalysisService` (or None),
set by :func:`dashboards.app.build_dash_app`; the trace, Stages and Hotspots pages read it."""
NO_ANALYSIS = "The analysis service is not configured in this app."
_GRAPH_CONFIG = {"displaylogo": False, "responsive": True}
_PERSIST = {"persistence": True, "persistence_type": "session"}


def analysis_service() -> AnalysisService | None:
    """The current app's analysis service (call inside a callback)."""
    return flask.current_app.config.get(ANALYSIS_CONFIG)


def window_filter(reader: TraceReader, lookback: str | None, tenant: str | None) -> tuple[AnalysisFilter, int]:
    """The :class:`AnalysisFilter` window of a lookback choice and a bucket step in seconds (about
    :data:`dashboards.windows.TARGET_POINTS` buckets over the stored span range for "all")."""
    stored = reader.rollup_time_range(tenant=tenant) if isinstance(reader, RollupReader) else None
    start, end, step_s = analysis_window(lookback or DEFAULT_ROLLUP_LOOKBACK, time.time_ns(), stored)
    return AnalysisFilter(start_ns=start, end_ns=end), step_s


def lookback_control(page_id: str) -> Component:
    """The window dropdown (id ``<page_id>-lookback``) and a refresh button (``<page_id>-refresh``)."""
    return html.Div(
        className="hs-card hs-field-row",
        children=[
            html.Div(
                className="hs-field",
                children=[
                    html.Label("Window", className="hs-label"),
                    dcc.Dropdown(
                        id=f"{page_id}-lookback",
                        options=lookback_options(),
                        value=DEFAULT_ROLLUP_LOOKBACK,
                        clearable=False,
                        **_PERSIST,
                    ),
                ],
            ),
            html.Button("Refresh", id=f"{page_id}-refresh", className="hs-button"),
        ],
    )


def section_title(text: str, hint: str) -> Component:
    """A card heading with a muted hint beside it."""
    return html.H2(className="hs-section-title", children=[text, html.Span(f"  {hint}", className="hs-hint")])


def layout(**_query: str) -> Component:
    """Window control, the shares figure, latency facts and the percentile table; the callback fills them."""
    return html.Div(
        className="hs-page hs-stages",
        children=[
            lookback_control("stages"),
            html.Div(id="stages-message", className="hs-message", role="alert"),
            html.Section(
                className="hs-card",
                children=[
                    section_title("Latency", "analysed requests: end to end, time to first token, per output token"),
                    html.Div(id="stages-latency"),
                ],
            ),
            html.Section(
                className="hs-card",
                children=[
                    section_title("Stage shares over time", "summed stage time over summed e2e latency per bucket"),
                    dcc.Graph(id="stages-shares", figure=empty_figure("Loading…"), config=_GRAPH_CONFIG),
                ],
            ),
            html.Section(
                className="hs-card",
                children=[
                    section_title("Per stage", "ms per request along the critical path; share of e2e latency"),
                    dcc.Loading(html.Div(id="stages-table"), type="dot"),
                ],
            ),
        ],
    )


def register_callbacks(app: Dash, reader: TraceReader) -> None:
    """Fill the page from the app's analysis service for the chosen window and the caller's tenant."""

    @app.callback(
        Output("stages-shares", "figure"),
        Output("stages-table", "children"),
        Output("stages-latency", "children"),
        Output("stages-message", "children"),
        Input("stages-lookback", "value"),
        Input("stages-refresh", "n_clicks"),
    )
    def load(lookback: str | None, _clicks: int | None) -> tuple[go.Figure, Component, Component, str]:
        service = analysis_service()
        if service is None:
            return empty_figure(NO_ANALYSIS), html.Div(), html.Div(), NO_ANALYSIS
        tenant = read_tenant()
        try:
            where, step_s = window_filter(reader, lookback, tenant)
            shares = service.stage_shares_over_time(where, step_s, tenant=tenant)
            report = service.stages(where, tenant=tenant)
        except (StorageError, ValueError) as exc:
            return empty_figure("No data"), html.Div(), html.Div(), str(exc)
        return (
            stage_shares_figure(shares),
            stage_percentile_table(report.percentiles),
            latency_facts(report.latency),
            "",
        )


PAGE = Page(
    module=__name__,
    path="/stages",
    name="Stages",
    layout=layout,
    register_callbacks=register_callbacks,
    title="Stages · Hotspan",
)
