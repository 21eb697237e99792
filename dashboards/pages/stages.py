"""Stages page (``/ui/stages``): where requests' time goes over a window: stage shares of end-to-end latency
over time, p50/p95/p99 per stage with its share, end-to-end latency, TTFT and TPOT, and how many requests rest on
a repaired window (root missing or never ended, orphans attached, work kept past the span that started it:
``analysis.request_window``), with the longest of each. Reads the trace pipeline's tables through
:class:`query.analysis_service.AnalysisService` (requests quiet for ``trace_idle_s``)."""

from __future__ import annotations

import plotly.graph_objects as go
from dash import Dash, Output, dcc, html
from dash.development.base_component import Component

from dashboards.analysis_figures import latency_facts, stage_percentile_table, stage_shares_figure, window_quality_table
from dashboards.controls import page_url, scoped, section, url_output, window_filter, window_inputs, window_page
from dashboards.figures import empty_figure
from dashboards.links import drilldown, search_href
from dashboards.pages import Page
from dashboards.tenancy import read_tenant
from query.drilldown import stage_examples
from query.service import QueryService
from query.store import StorageError

_GRAPH_CONFIG = {"displaylogo": False, "responsive": True}
SCOPE = ("service", "model", "tenant")
"""The scopes the Stages page takes: the request's root service, its model, the tenant its spans name."""


def layout(**query: str) -> Component:
    """Window and scope (from the URL), the shares figure, latency facts and the percentile table; the callback
    fills them."""
    return window_page(
        "stages",
        section(
            "Latency",
            "analysed requests: end to end, time to first token, per output token",
            html.Div(id="stages-latency"),
        ),
        section(
            "Stage shares over time",
            "summed stage time over summed e2e latency per bucket",
            dcc.Graph(id="stages-shares", figure=empty_figure("Loading…"), config=_GRAPH_CONFIG),
        ),
        section(
            "Per stage",
            "ms per request along the critical path; share of e2e latency",
            dcc.Loading(html.Div(id="stages-table"), type="dot"),
        ),
        section(
            "Data quality",
            "requests whose window the analysis repaired, by repair; the trace search cannot filter by repair, so "
            "the longest of each are linked",
            html.Div(id="stages-quality"),
        ),
        query=query,
        scopes=SCOPE,
    )


def register_callbacks(app: Dash, query: QueryService) -> None:
    """Fill the page from the app's analysis service for the chosen window, scope and the caller's tenant; each
    stage row links to the requests where it took longest and to the search of them all (the scope's traces
    sorted by that stage's time), each repair of the request window to its longest requests."""

    @app.callback(
        Output("stages-shares", "figure"),
        Output("stages-table", "children"),
        Output("stages-latency", "children"),
        Output("stages-quality", "children"),
        Output("stages-message", "children"),
        url_output("stages"),
        *window_inputs("stages", *SCOPE),
    )
    def load(
        lookback: str | None,
        root_service: str | None,
        model: str | None,
        request_tenant: str | None,
        _clicks: int | None,
    ) -> tuple[go.Figure, Component, Component, Component, str, str]:
        scope = {"service": root_service, "model": model, "tenant": request_tenant}
        url = page_url(lookback, **scope)
        service = query.analysis
        tenant = read_tenant()
        try:
            where, step_s = window_filter(query, lookback, tenant)
            where = scoped(where, **scope)
            shares = service.stage_shares_over_time(where, step_s, tenant=tenant)
            report = service.stages(where, tenant=tenant)
            examples = stage_examples(service, where, tenant=tenant)
            repaired = service.quality_examples(where, tenant=tenant)
        except (StorageError, ValueError) as exc:
            return empty_figure("No data"), html.Div(), html.Div(), html.Div(), str(exc), url
        prefix = app.get_relative_path("/").rstrip("/")
        return (
            stage_shares_figure(shares),
            stage_percentile_table(
                report.percentiles,
                # Each stage's full list is the requests where that stage took longest, not the scope's slowest.
                lambda stage: drilldown(
                    prefix, examples.get(stage, []), search_href(prefix, lookback=lookback, stage=stage, **scope)
                ),
            ),
            latency_facts(report.latency),
            window_quality_table(report.quality, lambda repair: drilldown(prefix, repaired.get(repair, []), None)),
            "",
            url,
        )


PAGE = Page(
    module=__name__,
    path="/stages",
    name="Stages",
    layout=layout,
    register_callbacks=register_callbacks,
    title="Stages · Hotspan",
)
