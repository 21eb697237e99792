"""Comparison page (``/ui/compare``): two traces side by side (``?a=<trace ID>&b=<trace ID>``: stage deltas and
the span paths that changed, :mod:`query.trace_compare`), and a window's slow requests against its baseline
(``?lookback=1h&service=…&quantile=0.9``: which stages grew and which attribute values the slow requests carry,
:mod:`query.window_compare`). Both comparisons are in the URL, so they can be linked and reloaded."""

from __future__ import annotations

from urllib.parse import urlencode

from dash import Dash, Input, Output, State, dcc, get_relative_path, html, no_update
from dash.development.base_component import Component

from dashboards.compare_panels import trace_comparison_panel, window_comparison_panel
from dashboards.controls import field, page_url, scoped, section, text_input, url_output, window_filter
from dashboards.pages import Page, query_room
from dashboards.query_form import FormError, normalize_trace_id
from dashboards.tenancy import read_tenant
from dashboards.windows import DEFAULT_ROLLUP_LOOKBACK, lookback_options
from query.service import QueryService
from query.store import StorageError
from query.trace_compare import compare_traces
from query.window_compare import compare_window

DEFAULT_QUANTILE = 0.9
TRACE_ID_HINT = "32 (or 16) hex characters"


def layout(**query: str) -> Component:
    """The two forms, the two traces' comparison when the URL names both (read here: one round trip), and the
    window comparison, filled by its callback."""
    a, b = query.get("a"), query.get("b")
    quantile = _quantile(query.get("quantile"))
    traces = html.Div(
        className="hs-field-row hs-compare-form",
        children=[
            field("Trace A", text_input("compare-a", a, TRACE_ID_HINT)),
            field("Trace B", text_input("compare-b", b, TRACE_ID_HINT)),
            html.Button("Compare traces", id="compare-traces", className="hs-button hs-button-primary"),
        ],
    )
    window = html.Div(
        className="hs-field-row hs-compare-form",
        children=[
            field(
                "Window",
                dcc.Dropdown(
                    id="compare-lookback",
                    options=lookback_options(),
                    value=query.get("lookback") or DEFAULT_ROLLUP_LOOKBACK,
                    clearable=False,
                ),
            ),
            field("Root service", text_input("compare-service", query.get("service"), "any")),
            field("Slow from quantile", text_input("compare-quantile", str(quantile), "0.9")),
            html.Button("Compare slow with baseline", id="compare-window", className="hs-button hs-button-primary"),
        ],
    )
    return html.Div(
        className="hs-page hs-compare",
        children=[
            section("Two traces", "span paths and stages of B against A", html.Div([traces, _traces(a, b)])),
            section(
                "Slow requests against the baseline",
                "the window's analysed requests at or above a duration quantile against the rest",
                html.Div([window, dcc.Loading(html.Div(id="compare-window-result"), type="dot")]),
            ),
            html.Div(id="compare-message", className="hs-message", role="alert"),
            dcc.Location(id="compare-nav", refresh="callback-nav"),
            dcc.Location(id="compare-url", refresh=False),
        ],
    )


def register_callbacks(app: Dash, query: QueryService) -> None:
    """Open a two-trace comparison from the form; compare the chosen window's slow requests with its baseline."""

    @app.callback(
        Output("compare-nav", "href"),
        Input("compare-traces", "n_clicks"),
        State("compare-a", "value"),
        State("compare-b", "value"),
        prevent_initial_call=True,
    )
    def open_comparison(_clicks: int | None, a: str | None, b: str | None) -> str | object:
        if not (a and b):
            return no_update
        return app.get_relative_path("/compare") + "?" + urlencode({"a": a.strip(), "b": b.strip()})

    @app.callback(
        Output("compare-window-result", "children"),
        Output("compare-message", "children"),
        url_output("compare"),
        Input("compare-window", "n_clicks"),
        State("compare-lookback", "value"),
        State("compare-service", "value"),
        State("compare-quantile", "value"),
        State("compare-a", "value"),
        State("compare-b", "value"),
    )
    def window(
        clicks: int | None,
        lookback: str | None,
        service: str | None,
        quantile_text: str | None,
        a: str | None,
        b: str | None,
    ) -> tuple[Component, str, object]:
        if not clicks and (a or b):
            return html.Div(), "", no_update  # a two-trace comparison was asked for; the window waits for its button
        analysis = query.analysis
        quantile = _quantile(quantile_text)
        tenant = read_tenant()
        try:
            where, _step = window_filter(query, lookback, tenant)
            result = compare_window(analysis, scoped(where, service=service), tenant=tenant, quantile=quantile)
        except (StorageError, ValueError) as exc:
            return html.Div(), str(exc), no_update
        url = page_url(lookback, service=service, quantile=str(quantile) if quantile != DEFAULT_QUANTILE else None)
        return window_comparison_panel(result, quantile), "", url


def _traces(a: str | None, b: str | None) -> Component:
    """The two traces' comparison, or why there is none."""
    if not (a and b):
        return html.P("Enter two trace IDs, or open one trace's page and compare it from there.", className="hs-hint")
    try:
        views = [query_room().views.get(normalize_trace_id(trace_id), tenant=read_tenant()) for trace_id in (a, b)]
    except (FormError, StorageError, ValueError) as exc:
        return html.P(str(exc), className="hs-message")
    missing = [trace_id for trace_id, view in zip((a, b), views, strict=True) if view is None]
    if missing:
        return html.P(f"Trace {', '.join(missing)} not found.", className="hs-message")
    prefix = _prefix()
    return html.Div(id="compare-traces-result", children=trace_comparison_panel(compare_traces(*views), prefix))  # type: ignore[arg-type]


def _prefix() -> str:
    """The app's URL prefix (``/ui``), for links."""
    return get_relative_path("/").rstrip("/")


def _quantile(text: str | None) -> float:
    try:
        value = float(text) if text else DEFAULT_QUANTILE
    except ValueError:
        return DEFAULT_QUANTILE
    return value if 0 < value < 1 else DEFAULT_QUANTILE


PAGE = Page(
    module=__name__,
    path="/compare",
    name="Compare",
    layout=layout,
    register_callbacks=register_callbacks,
    title="Compare · Hotspan",
)
