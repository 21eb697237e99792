"""Search page (``/ui/``): find traces by service, operation, attributes, status, span and whole-trace duration,
a relative or absolute time range, sorted on the server (:mod:`query.trace_search`); a duration-over-time
scatter and a result grid (with each request's model calls, tokens, cost and dominant stage) whose rows open the
trace page. The whole query lives in the URL."""

from __future__ import annotations

import time
from collections.abc import Callable

import dash_ag_grid as dag
import plotly.graph_objects as go
from dash import Dash, Input, Output, State, ctx, dcc, html, no_update
from dash.development.base_component import Component

from analysis import STAGES
from dashboards.colors import stage_label
from dashboards.controls import field, text_input
from dashboards.figures import empty_figure, search_scatter_figure
from dashboards.pages import Page
from dashboards.query_form import (
    DEFAULT_LOOKBACK,
    LOOKBACKS,
    MAX_LIMIT,
    STATUSES,
    FormError,
    SearchForm,
    build_search,
    form_from_url,
    form_to_url,
)
from dashboards.search_rows import search_rows
from dashboards.tenancy import read_tenant
from query.service import QueryService
from query.store import StorageError
from query.trace_search import SORT_LABELS, SORTS

TRACE_COLUMN = "trace"

COLUMNS = [
    {
        "field": TRACE_COLUMN,
        "headerName": "Trace · start (UTC)",
        "cellRenderer": "markdown",
        "cellClass": "hs-mono hs-trace-cell",
        "width": 232,
        "sortable": False,
    },
    {
        # The root's service and operation in one column, as Jaeger's results read them ("gateway: POST /v1/agent"):
        # two columns of it pushed the model-use columns past the right edge of a 1440 px screen.
        "field": "root_name",
        "headerName": "Root",
        "valueGetter": {"function": "params.data.root_service + ': ' + params.data.root_name"},
        "tooltipValueGetter": {"function": "params.data.root_service + ': ' + params.data.root_name"},
        "minWidth": 120,
        "flex": 1,
        # Two lines, as the first column has: a long operation name wraps rather than being cut.
        "wrapText": True,
        "cellClass": "hs-wrap-cell",
    },
    {
        "field": "duration_ns",
        "headerName": "Duration",
        "type": "numericColumn",
        "width": 86,
        "valueFormatter": {"function": "hsDuration(params.value)"},
    },
    # The model-use columns right after the duration: what an LLM request's row is read for. Their headers name the
    # unit and wrap, so the cells hold bare numbers and the columns stay narrow.
    {
        "field": "llm_calls",
        "headerName": "LLM calls",
        "headerTooltip": "Model calls of the request, once the trace pipeline has analysed it",
        "type": "numericColumn",
        "width": 56,
    },
    {
        "field": "input_tokens",
        "headerName": "Tokens in",
        "type": "numericColumn",
        "width": 70,
        "valueFormatter": {"function": "hsCount(params.value)"},
    },
    {
        "field": "output_tokens",
        "headerName": "Tokens out",
        "type": "numericColumn",
        "width": 70,
        "valueFormatter": {"function": "hsCount(params.value)"},
    },
    {"field": "cost", "headerName": "Cost", "type": "numericColumn", "width": 72},
    {
        # Wide enough for the longest stage label in two lines ("LLM call" / "(untraced inside)"), as the row has.
        "field": "dominant_stage",
        "headerName": "Dominant stage",
        "width": 120,
        "wrapText": True,
        "cellClass": "hs-wrap-cell",
    },
    {"field": "span_count", "headerName": "Spans", "type": "numericColumn", "width": 60},
    {
        "field": "error_count",
        "headerName": "Errors",
        "type": "numericColumn",
        "width": 62,
        "cellClassRules": {"hs-error-cell": "params.value > 0"},
    },
    {
        "field": "hotspot_count",
        "headerName": "Hotspots",
        "headerTooltip": "Spans flagged hotspan.hotspot=true by the SDK HotspotSpanProcessor",
        "type": "numericColumn",
        "width": 76,
        "cellClassRules": {"hs-hotspot-cell": "params.value > 0"},
    },
]
"""Result grid columns; keys match :func:`dashboards.search_rows.search_rows`. :func:`result_columns` fits them to
a search's rows."""
OPTIONAL_COLUMNS = ("cost", "hotspot_count")
"""Columns shown only when a row has a value in them (:func:`result_columns`)."""
FORM_FIELDS = {
    "service": "search-service",
    "operation": "search-operation",
    "min_duration_ms": "search-min-duration",
    "max_duration_ms": "search-max-duration",
    "lookback": "search-lookback",
    "attributes": "search-attributes",
    "status": "search-status",
    "limit": "search-limit",
    "min_trace_ms": "search-min-trace",
    "max_trace_ms": "search-max-trace",
    "start": "search-start",
    "end": "search-end",
    "sort": "search-sort",
    "stage": "search-stage",
}
""":class:`~dashboards.query_form.SearchForm` field → the component holding it."""
SUBMITTING_INPUTS = (
    "search-attributes",
    "search-min-duration",
    "search-max-duration",
    "search-min-trace",
    "search-max-trace",
    "search-start",
    "search-end",
    "search-limit",
)
"""Fields whose Enter runs the search (as the button does)."""
NO_RESULTS = "No results: the search has an error (see the form)"
"""The scatter's text when the form's search cannot run."""


def layout(**query: str) -> Component:
    """The search form beside the results, filled from the URL's query string (:func:`form_from_url`), so a
    search can be bookmarked, shared and reloaded; the search runs on load."""
    form = form_from_url(query)
    controls = html.Aside(
        className="hs-card hs-search-form",
        children=[
            html.H2("Find traces"),
            field(
                "Service",
                dcc.Dropdown(
                    id="search-service",
                    placeholder="All services",
                    value=form.service,
                    options=[form.service] if form.service else [],
                ),
            ),
            field(
                "Operation",
                dcc.Dropdown(
                    id="search-operation",
                    placeholder="All operations",
                    value=form.operation,
                    options=[form.operation] if form.operation else [],
                ),
            ),
            field(
                "Attributes",
                text_input("search-attributes", form.attributes, "http.status_code=500 error=true"),
                hint='key=value, separated by spaces; quote values with spaces: k="a b"',
            ),
            field(
                "Span status",
                dcc.Dropdown(
                    id="search-status",
                    options=[{"label": status, "value": status} for status in STATUSES],
                    placeholder="Any status",
                    value=form.status,
                ),
            ),
            html.Div(
                className="hs-field-row",
                children=[
                    field("Span ≥ (ms)", _number_input("search-min-duration", minimum=0, value=form.min_duration_ms)),
                    field("Span ≤ (ms)", _number_input("search-max-duration", minimum=0, value=form.max_duration_ms)),
                ],
            ),
            html.Div(
                className="hs-field-row",
                children=[
                    field("Trace ≥ (ms)", _number_input("search-min-trace", minimum=0, value=form.min_trace_ms)),
                    field("Trace ≤ (ms)", _number_input("search-max-trace", minimum=0, value=form.max_trace_ms)),
                ],
            ),
            html.Div(
                "Span: one of its spans lasts that long (Jaeger's rule). Trace: first start to last end.",
                className="hs-hint",
            ),
            field(
                "Lookback",
                dcc.Dropdown(
                    id="search-lookback",
                    options=[{"label": label, "value": key} for key, (label, _) in LOOKBACKS.items()],
                    value=form.lookback if form.lookback in LOOKBACKS else DEFAULT_LOOKBACK,
                    clearable=False,
                ),
            ),
            html.Div(
                className="hs-field-row",
                children=[
                    field("From (UTC)", text_input("search-start", form.start, "2024-10-30 12:00")),
                    field("To (UTC)", text_input("search-end", form.end, "2024-10-30 13:00")),
                ],
            ),
            html.Div("An absolute range, when given, replaces the lookback.", className="hs-hint"),
            html.Div(
                className="hs-field-row",
                children=[
                    field(
                        "Sort",
                        dcc.Dropdown(
                            id="search-sort",
                            options=[{"label": SORT_LABELS[sort], "value": sort} for sort in SORTS],
                            value=form.sort if form.sort in SORTS else "newest",
                            clearable=False,
                        ),
                    ),
                    field(
                        "Limit",
                        _number_input("search-limit", minimum=1, maximum=MAX_LIMIT, value=form.limit, step=1),
                    ),
                ],
            ),
            field(
                "Stage",
                dcc.Dropdown(
                    id="search-stage",
                    options=[{"label": stage_label(stage), "value": stage} for stage in STAGES],
                    placeholder="for the sort by stage time",
                    value=form.stage,
                ),
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
                defaultColDef={
                    "sortable": True,
                    "resizable": True,
                    "filter": False,
                    "wrapHeaderText": True,
                    "autoHeaderHeight": True,
                },
                # Columns keep their widths and Root takes the rest (flex); past the sum of widths (below about
                # 1280 px) the grid scrolls sideways within itself.
                getRowId="params.data.trace_id",
                dashGridOptions={
                    "domLayout": "autoHeight",
                    # Two lines in the first column: the trace ID and its start.
                    "rowHeight": 48,
                    "pagination": True,
                    "paginationPageSize": 50,
                    "paginationPageSizeSelector": False,
                    "animateRows": False,
                },
            ),
            dcc.Store(id="search-init", data=True),
            dcc.Location(id="search-nav", refresh="callback-nav"),
            dcc.Location(id="search-url", refresh=False),
        ],
    )
    return html.Div(className="hs-page hs-search", children=[controls, results])


def result_columns(currency: str, rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """:data:`COLUMNS` for a search's ``rows`` (:func:`dashboards.search_rows.search_rows`): the cost's header names
    ``currency``; the Cost and Hotspots columns are left out when no row has a value there (a model the price table
    does not price has no cost; only traces from the SDK's ``HotspotSpanProcessor`` have hotspots): an empty column
    took the width the others need on a 1280 px screen."""
    empty = {field for field in OPTIONAL_COLUMNS if not any(row.get(field) for row in rows)}
    return [
        column | {"headerName": f"Cost ({currency})"} if column["field"] == "cost" else column
        for column in COLUMNS
        if column["field"] not in empty
    ]


def register_callbacks(app: Dash, query: QueryService) -> None:
    """Wire the form to the query room: service and operation choices, the search (whose query goes to the URL),
    and opening a trace."""

    @app.callback(Output("search-service", "options"), Input("search-init", "data"))
    def load_services(_init: object) -> list[str]:
        return query.services(tenant=read_tenant())

    @app.callback(
        Output("search-operation", "options"),
        Output("search-operation", "value"),
        Input("search-service", "value"),
        State("search-operation", "value"),
    )
    def load_operations(service: str | None, operation: str | None) -> tuple[list[str], str | None]:
        if not service:
            return [], None
        names = sorted({name for name, _kind in query.operations(service, tenant=read_tenant())})
        return names, operation if operation in names else None

    @app.callback(
        Output("search-results", "rowData"),
        Output("search-results", "columnDefs"),
        Output("search-scatter", "figure"),
        Output("search-count", "children"),
        Output("search-message", "children"),
        Output("search-url", "search"),
        Input("search-submit", "n_clicks"),
        *(Input(name, "n_submit") for name in SUBMITTING_INPUTS),
        *(State(name, "value") for name in FORM_FIELDS.values()),
    )
    def run_search(_clicks: int | None, *values: object) -> tuple[object, object, go.Figure | object, str, str, object]:
        # An empty field takes the form's default (no lookback chosen: all time; no sort: newest first).
        chosen = dict(zip(FORM_FIELDS, values[len(SUBMITTING_INPUTS) :], strict=True))
        form = SearchForm(**{name: value for name, value in chosen.items() if value is not None})  # type: ignore[arg-type]
        tenant = read_tenant()
        try:
            search = build_search(form, time.time_ns())
            result = query.search(search, tenant=tenant)
        except (FormError, StorageError, ValueError) as exc:
            # Results are cleared, not kept: under the error they would read as this search's, and on a page
            # opened from a URL with a bad field the scatter would say "Searching…" for good.
            return [], no_update, empty_figure(NO_RESULTS), "", str(exc), no_update
        traces = result.traces
        count = f"{traces.height} trace{'s' if traces.height != 1 else ''}"
        if search.sort == "longest_stage":
            count += f" · longest in {stage_label(search.stage)} first, of all that spent time in it"
        elif result.ranked:
            count += f" · {SORT_LABELS[search.sort].lower()} of all matches"
        url = form_to_url(form)
        rows = search_rows(traces, _trace_href(app))
        columns = result_columns(query.analysis.currency, rows)
        return rows, columns, search_scatter_figure(traces), count, "", url or ""

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
    """A number field that reports on Enter or blur (debounced)."""
    return dcc.Input(
        id=component_id,
        type="number",
        min=minimum,
        max=maximum,
        value=value,
        step=step,
        debounce=True,
        className="hs-input",
    )


PAGE = Page(
    module=__name__,
    path="/",
    name="Search",
    layout=layout,
    register_callbacks=register_callbacks,
    title="Search · Hotspan",
)
