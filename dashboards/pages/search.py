"""Search page (``/ui/``): find traces by service, operation, span duration, lookback and attributes;
a duration-over-time scatter and a result grid whose rows open the trace page."""

from __future__ import annotations

import time
from collections.abc import Callable

import dash_ag_grid as dag
import plotly.graph_objects as go
from dash import Dash, Input, Output, State, ctx, dcc, html, no_update
from dash.development.base_component import Component

from dashboards.controls import PERSIST, field
from dashboards.figures import empty_figure, search_scatter_figure
from dashboards.pages import Page
from dashboards.query_form import (
    DEFAULT_LIMIT,
    DEFAULT_LOOKBACK,
    LOOKBACKS,
    MAX_LIMIT,
    STATUSES,
    FormError,
    SearchForm,
    build_trace_query,
)
from dashboards.tenancy import read_tenant
from dashboards.views import search_rows
from storage.clickhouse import StorageError
from storage.reader import TraceReader

TRACE_COLUMN = "trace"

COLUMNS = [
    {
        "field": TRACE_COLUMN,
        "headerName": "Trace",
        "cellRenderer": "markdown",
        "cellClass": "hs-mono",
        "minWidth": 170,
        "sortable": False,
    },
    {"field": "root_service", "headerName": "Root service", "minWidth": 130},
    {"field": "root_name", "headerName": "Root operation", "minWidth": 200, "flex": 2},
    {"field": "start", "headerName": "Start (UTC)", "minWidth": 200},
    {"field": "duration_ms", "headerName": "Duration (ms)", "type": "numericColumn", "minWidth": 120},
    {"field": "span_count", "headerName": "Spans", "type": "numericColumn", "maxWidth": 100},
    {"field": "service_count", "headerName": "Services", "type": "numericColumn", "maxWidth": 110},
    {
        "field": "error_count",
        "headerName": "Errors",
        "type": "numericColumn",
        "maxWidth": 100,
        "cellClassRules": {"hs-error-cell": "params.value > 0"},
    },
    {
        "field": "hotspot_count",
        "headerName": "Hotspots",
        "headerTooltip": "Spans flagged hotspan.hotspot=true by the SDK HotspotSpanProcessor",
        "type": "numericColumn",
        "maxWidth": 110,
        "cellClassRules": {"hs-hotspot-cell": "params.value > 0"},
    },
]
"""Result grid columns; keys match :func:`dashboards.views.search_rows`."""

"""Form values survive a visit to a trace page and back."""


def layout(**_query: str) -> Component:
    """The search form beside the results; everything is filled by callbacks."""
    form = html.Aside(
        className="hs-card hs-search-form",
        children=[
            html.H2("Find traces"),
            field("Service", dcc.Dropdown(id="search-service", placeholder="All services", **PERSIST)),
            field("Operation", dcc.Dropdown(id="search-operation", placeholder="All operations", **PERSIST)),
            field(
                "Attributes",
                dcc.Input(
                    id="search-attributes",
                    type="text",
                    placeholder="http.status_code=500 error=true",
                    debounce=True,
                    className="hs-input",
                    **PERSIST,
                ),
                hint='key=value, separated by spaces; quote values with spaces: k="a b"',
            ),
            field(
                "Span status",
                dcc.Dropdown(
                    id="search-status",
                    options=[{"label": status, "value": status} for status in STATUSES],
                    placeholder="Any status",
                    **PERSIST,
                ),
            ),
            html.Div(
                className="hs-field-row",
                children=[
                    field("Min duration (ms)", _number_input("search-min-duration", minimum=0)),
                    field("Max duration (ms)", _number_input("search-max-duration", minimum=0)),
                ],
            ),
            field(
                "Lookback",
                dcc.Dropdown(
                    id="search-lookback",
                    options=[{"label": label, "value": key} for key, (label, _) in LOOKBACKS.items()],
                    value=DEFAULT_LOOKBACK,
                    clearable=False,
                    **PERSIST,
                ),
            ),
            field(
                "Limit results",
                _number_input("search-limit", minimum=1, maximum=MAX_LIMIT, value=DEFAULT_LIMIT, step=1),
            ),
            html.Button("Find traces", id="search-submit", className="hs-button hs-button-primary"),
            html.Div(id="search-message", className="hs-message", role="alert"),
        ],
    )
    results = html.Section(
        className="hs-search-results",
        children=[
            html.Div(id="search-count", className="hs-results-header"),
            html.Div(
                className="hs-card",
                children=dcc.Graph(
                    id="search-scatter",
                    figure=empty_figure("Searching…"),
                    config={"displayModeBar": False, "responsive": True},
                ),
            ),
            dag.AgGrid(
                id="search-results",
                className="ag-theme-quartz hs-grid",
                columnDefs=COLUMNS,
                rowData=[],
                defaultColDef={"sortable": True, "resizable": True, "filter": False},
                columnSize="responsiveSizeToFit",
                getRowId="params.data.trace_id",
                dashGridOptions={
                    "domLayout": "autoHeight",
                    "rowHeight": 36,
                    "pagination": True,
                    "paginationPageSize": 50,
                    "paginationPageSizeSelector": False,
                    "animateRows": False,
                },
            ),
            dcc.Store(id="search-init", data=True),
            dcc.Location(id="search-nav", refresh="callback-nav"),
        ],
    )
    return html.Div(className="hs-page hs-search", children=[form, results])


def register_callbacks(app: Dash, reader: TraceReader) -> None:
    """Wire the form to ``reader``: service and operation choices, the search, and opening a trace."""

    @app.callback(Output("search-service", "options"), Input("search-init", "data"))
    def load_services(_init: object) -> list[str]:
        return reader.services(tenant=read_tenant())

    @app.callback(
        Output("search-operation", "options"),
        Output("search-operation", "value"),
        Input("search-service", "value"),
        State("search-operation", "value"),
    )
    def load_operations(service: str | None, operation: str | None) -> tuple[list[str], str | None]:
        if not service:
            return [], None
        names = sorted({name for name, _kind in reader.operations(service, tenant=read_tenant())})
        return names, operation if operation in names else None

    @app.callback(
        Output("search-results", "rowData"),
        Output("search-scatter", "figure"),
        Output("search-count", "children"),
        Output("search-message", "children"),
        Input("search-submit", "n_clicks"),
        Input("search-attributes", "n_submit"),
        Input("search-min-duration", "n_submit"),
        Input("search-max-duration", "n_submit"),
        Input("search-limit", "n_submit"),
        State("search-service", "value"),
        State("search-operation", "value"),
        State("search-min-duration", "value"),
        State("search-max-duration", "value"),
        State("search-lookback", "value"),
        State("search-attributes", "value"),
        State("search-status", "value"),
        State("search-limit", "value"),
    )
    def run_search(
        _clicks: int | None,
        _submit_attributes: int | None,
        _submit_min: int | None,
        _submit_max: int | None,
        _submit_limit: int | None,
        service: str | None,
        operation: str | None,
        min_duration_ms: float | None,
        max_duration_ms: float | None,
        lookback: str | None,
        attributes: str | None,
        status: str | None,
        limit: int | None,
    ) -> tuple[object, go.Figure | object, str, str]:
        form = SearchForm(
            service=service,
            operation=operation,
            min_duration_ms=min_duration_ms,
            max_duration_ms=max_duration_ms,
            lookback=lookback or DEFAULT_LOOKBACK,
            attributes=attributes,
            status=status,
            limit=limit,
        )
        try:
            summaries = reader.search(build_trace_query(form, time.time_ns()), tenant=read_tenant())
        except (FormError, StorageError) as exc:
            return no_update, no_update, no_update, str(exc)
        count = f"{summaries.height} trace{'s' if summaries.height != 1 else ''}"
        return search_rows(summaries, _trace_href(app)), search_scatter_figure(summaries), count, ""

    @app.callback(
        Output("search-nav", "href"),
        Input("search-scatter", "clickData"),
        Input("search-results", "cellClicked"),
        prevent_initial_call=True,
    )
    def open_trace(scatter_click: dict | None, cell_click: dict | None) -> str | object:
        trace_id = _clicked_trace_id(ctx.triggered_id, scatter_click, cell_click)
        return _trace_href(app)(trace_id) if trace_id else no_update


def _clicked_trace_id(source: str | None, scatter_click: dict | None, cell_click: dict | None) -> str | None:
    """The trace a click chose: a scatter dot, or any grid cell but the link column (the link itself
    navigates there). Grid rows are keyed by trace ID (``getRowId``), so sorting does not matter."""
    if source == "search-scatter" and scatter_click:
        return str(scatter_click["points"][0]["customdata"][0])
    if source == "search-results" and cell_click and cell_click.get("colId") != TRACE_COLUMN:
        return cell_click.get("rowId")
    return None


def _trace_href(app: Dash) -> Callable[[str], str]:
    """``trace_id → URL path`` of its trace page under this app's prefix."""
    return lambda trace_id: app.get_relative_path(f"/trace/{trace_id}")


def _number_input(
    component_id: str,
    *,
    minimum: float,
    maximum: float | None = None,
    value: float | None = None,
    step: float | str = "any",
) -> Component:
    """A number field that reports on Enter or blur (debounced) and survives navigation."""
    return dcc.Input(
        id=component_id,
        type="number",
        min=minimum,
        max=maximum,
        value=value,
        step=step,
        debounce=True,
        className="hs-input",
        **PERSIST,
    )


PAGE = Page(
    module=__name__,
    path="/",
    name="Search",
    layout=layout,
    register_callbacks=register_callbacks,
    title="Search · Hotspan",
)
