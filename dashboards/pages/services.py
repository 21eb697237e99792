"""Services page (``/ui/services``): RED per service or operation from the per-minute rollup, a table with
sparklines, p95 latency over time, and, when a Prometheus URL is configured, vLLM's engine metrics for the
same window underneath."""

from __future__ import annotations

import time

import plotly.graph_objects as go
from dash import Dash, Input, Output, dcc, html
from dash.development.base_component import Component

from dashboards.figures import empty_figure
from dashboards.pages import Page
from dashboards.services_figures import engine_metrics_figure, red_latency_figure, red_table
from dashboards.tenancy import read_tenant
from dashboards.windows import DEFAULT_ROLLUP_LOOKBACK, lookback_options, rollup_window
from storage.clickhouse import StorageError
from storage.engine_metrics import EngineMetricsError, EngineMetricsReader
from storage.reader import TraceReader
from storage.rollup_reader import RedQuery, RollupReader

ENGINE_METRICS_CONFIG = "HOTSPAN_ENGINE_METRICS"
"""Key of the app's Flask config holding an :class:`~storage.engine_metrics.EngineMetricsReader` (or None),
set by :func:`dashboards.app.build_dash_app`."""

KIND_OPTIONS = [{"label": "Server spans", "value": "Server"}, {"label": "Consumer spans", "value": "Consumer"}]
KIND_OPTIONS += [{"label": "Client spans", "value": "Client"}, {"label": "All spans", "value": "all"}]
_GRAPH_CONFIG = {"displaylogo": False, "responsive": True}
_PERSIST = {"persistence": True, "persistence_type": "session"}


def layout(**_query: str) -> Component:
    """Controls, the RED table, the latency figure and the engine panel; callbacks fill them."""
    controls = html.Div(
        className="hs-card hs-field-row",
        children=[
            _field(
                "Window",
                dcc.Dropdown(
                    id="services-lookback",
                    options=lookback_options(),
                    value=DEFAULT_ROLLUP_LOOKBACK,
                    clearable=False,
                    **_PERSIST,
                ),
            ),
            _field(
                "Group by",
                dcc.RadioItems(
                    id="services-group-by",
                    options=[{"label": " Service", "value": "service"}, {"label": " Operation", "value": "operation"}],
                    value="service",
                    inline=True,
                    **_PERSIST,
                ),
            ),
            _field(
                "Spans",
                dcc.Dropdown(id="services-kind", options=KIND_OPTIONS, value="Server", clearable=False, **_PERSIST),
            ),
            html.Button("Refresh", id="services-refresh", className="hs-button"),
        ],
    )
    return html.Div(
        className="hs-page hs-services",
        children=[
            controls,
            html.Div(id="services-message", className="hs-message", role="alert"),
            html.Section(
                className="hs-card",
                children=[
                    _title("Rate, errors, duration", "from the per-minute RED rollup; sparklines: calls and p95"),
                    dcc.Loading(html.Div(id="services-table"), type="dot"),
                ],
            ),
            html.Section(
                className="hs-card",
                children=[
                    _title("Latency from traces", "p95 per step, busiest groups"),
                    dcc.Graph(id="services-latency", figure=empty_figure("Loading…"), config=_GRAPH_CONFIG),
                ],
            ),
            html.Section(
                className="hs-card",
                children=[
                    _title("vLLM engine", "from Prometheus (HOTSPAN_PROMETHEUS_URL), same window"),
                    html.Div(id="services-engine"),
                ],
            ),
        ],
    )


def register_callbacks(app: Dash, reader: TraceReader) -> None:
    """Wire the controls to the rollups of ``reader`` (a :class:`~storage.rollup_reader.RollupReader` too) and
    to the app's engine-metrics reader."""

    @app.callback(
        Output("services-table", "children"),
        Output("services-latency", "figure"),
        Output("services-engine", "children"),
        Output("services-message", "children"),
        Input("services-lookback", "value"),
        Input("services-group-by", "value"),
        Input("services-kind", "value"),
        Input("services-refresh", "n_clicks"),
    )
    def load(
        lookback: str | None, group_by: str | None, kind: str | None, _clicks: int | None
    ) -> tuple[Component, go.Figure, Component, str]:
        if not isinstance(reader, RollupReader):
            notice = "This store has no RED rollups."
            return html.P(notice, className="hs-hint"), empty_figure(notice), html.Div(), ""
        tenant = read_tenant()
        try:
            stored = reader.rollup_time_range(tenant=tenant)
            start, end, step = rollup_window(lookback or DEFAULT_ROLLUP_LOOKBACK, time.time_ns(), stored)
            query = RedQuery(
                "operation" if group_by == "operation" else "service",
                start,
                end,
                step,
                span_kind=None if kind in (None, "all") else kind,
            )
            result = reader.red(query, tenant=tenant)
        except (StorageError, ValueError) as exc:
            return html.Div(), empty_figure("No data"), html.Div(), str(exc)
        engine = app.server.config.get(ENGINE_METRICS_CONFIG)
        return (
            red_table(result.totals, result.series, (end - start) / 1e9),
            red_latency_figure(result.totals, result.series, (start, end)),
            _engine_panel(engine, start, end, step),
            "",
        )


def _engine_panel(engine: EngineMetricsReader | None, start_ns: int, end_ns: int, step_s: int) -> Component:
    if engine is None:
        return html.P(
            "Set HOTSPAN_PROMETHEUS_URL to a Prometheus that scrapes vLLM to see its queue, KV-cache, prefix-cache"
            " and TTFT metrics here.",
            className="hs-hint",
        )
    try:
        frame = engine.engine_series(start_ns, end_ns, step_s)
    except EngineMetricsError as exc:
        return html.P(str(exc), className="hs-message")
    return dcc.Graph(
        id="services-engine-graph", figure=engine_metrics_figure(frame, (start_ns, end_ns)), config=_GRAPH_CONFIG
    )


def _field(label: str, control: Component) -> Component:
    return html.Div(className="hs-field", children=[html.Label(label, className="hs-label"), control])


def _title(text: str, hint: str) -> Component:
    return html.H2(className="hs-section-title", children=[text, html.Span(f"  {hint}", className="hs-hint")])


PAGE = Page(
    module=__name__,
    path="/services",
    name="Services",
    layout=layout,
    register_callbacks=register_callbacks,
    title="Services · Hotspan",
)
