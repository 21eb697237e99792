"""Trace page (``/ui/trace/<trace_id>``): header facts, the request's stage bar, the waterfall timeline with
its critical path and a span detail panel, and the flame graph. ``/ui/trace`` alone explains how to open one."""

from __future__ import annotations

from urllib.parse import unquote

import plotly.graph_objects as go
from dash import Dash, Input, Output, State, ctx, dcc, html, no_update
from dash.development.base_component import Component

from dashboards.analysis_figures import add_critical_path, stage_bar_figure
from dashboards.figures import empty_figure, flame_graph_figure, waterfall_figure
from dashboards.format import format_duration_ns, format_time_ns
from dashboards.pages import Page
from dashboards.pages.stages import analysis_service
from dashboards.query_form import FormError, normalize_trace_id
from dashboards.span_tree import span_tree
from dashboards.tenancy import read_tenant
from dashboards.views import SpanDetail, TraceSummary, find_span_row, span_detail, trace_summary
from storage.clickhouse import StorageError
from storage.reader import TraceReader

_GRAPH_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}
_DETAIL_HINT = "Click a span in the timeline or the flame graph to see its attributes."


def layout(trace_id: str | None = None, **_query: str) -> Component:
    """Skeleton of the trace page; ``trace_id`` comes from the URL, still percent-encoded (Dash passes path
    variables as they are), and may be malformed (checked by the loading callback, which also fills every
    part)."""
    return html.Div(
        className="hs-page hs-trace",
        children=[
            dcc.Store(id="trace-id", data=unquote(trace_id) if trace_id else trace_id),
            html.Div(id="trace-header", className="hs-card hs-trace-header"),
            html.Section(
                className="hs-card",
                children=[
                    _section_title("Stages", "where the request's time went, along its critical path"),
                    html.Div(id="trace-stage-facts", className="hs-hint"),
                    dcc.Graph(id="trace-stages", figure=empty_figure("Loading…"), config=_GRAPH_CONFIG),
                ],
            ),
            html.Div(
                className="hs-trace-body",
                children=[
                    html.Section(
                        className="hs-card hs-timeline",
                        children=[
                            _section_title("Timeline", "ms since trace start, colored by service; dark: critical path"),
                            dcc.Loading(
                                dcc.Graph(
                                    id="trace-waterfall",
                                    figure=empty_figure("Loading…"),
                                    config=_GRAPH_CONFIG,
                                ),
                                type="dot",
                            ),
                        ],
                    ),
                    html.Aside(
                        id="trace-span-detail",
                        className="hs-card hs-span-detail",
                        children=html.P(_DETAIL_HINT, className="hs-hint"),
                    ),
                ],
            ),
            html.Section(
                className="hs-card",
                children=[
                    _section_title("Flame graph", "width = duration; click a tile to zoom, the bar above to go back"),
                    dcc.Graph(id="trace-flame", figure=empty_figure("Loading…"), config=_GRAPH_CONFIG),
                ],
            ),
        ],
    )


def title(trace_id: str | None = None) -> str:
    """Browser tab title."""
    return f"Trace {trace_id[:8]} · Hotspan" if trace_id else "Trace · Hotspan"


def register_callbacks(app: Dash, reader: TraceReader) -> None:
    """Wire the page to ``reader``: load the trace into header and figures; show a clicked span."""

    @app.callback(
        Output("trace-header", "children"),
        Output("trace-waterfall", "figure"),
        Output("trace-flame", "figure"),
        Output("trace-stages", "figure"),
        Output("trace-stage-facts", "children"),
        Input("trace-id", "data"),
    )
    def load_trace(raw_trace_id: str | None) -> tuple[Component, go.Figure, go.Figure, go.Figure, str]:
        if not raw_trace_id:
            return _no_trace("No trace selected", "Open one from Search, or paste its ID in the lookup box.")
        tenant = read_tenant()
        try:
            trace_id = normalize_trace_id(raw_trace_id)
            spans = reader.trace(trace_id, tenant=tenant)
        except (FormError, StorageError) as exc:
            return _no_trace("Cannot show this trace", str(exc))
        if spans.height == 0:
            return _no_trace(f"Trace {trace_id} not found", "It may not be stored yet, or it has expired.")
        tree = span_tree(spans)
        waterfall = waterfall_figure(spans, tree)
        service = analysis_service()
        if service is None:
            stage_figure, facts = empty_figure("The analysis service is not configured in this app."), ""
        else:
            try:
                sections = service.trace_critical_path(trace_id, tenant=tenant)
                stages = service.trace_stages(trace_id, tenant=tenant)
            except StorageError as exc:
                stage_figure, facts = empty_figure("Analysis unavailable"), str(exc)
            else:
                if sections is not None:
                    add_critical_path(waterfall, spans, tree, sections)
                stage_figure = (
                    stage_bar_figure(stages.stages_ns, stages.total_ns) if stages else empty_figure("No analysis")
                )
                facts = _stage_facts(stages.ttft_ns, stages.tpot_ns) if stages else ""
        return (
            _header(trace_summary(trace_id, spans, tree)),
            waterfall,
            flame_graph_figure(spans, tree),
            stage_figure,
            facts,
        )

    @app.callback(
        Output("trace-span-detail", "children"),
        Input("trace-waterfall", "clickData"),
        Input("trace-flame", "clickData"),
        State("trace-id", "data"),
        prevent_initial_call=True,
    )
    def show_span(
        waterfall_click: dict | None, flame_click: dict | None, raw_trace_id: str | None
    ) -> Component | object:
        click = waterfall_click if ctx.triggered_id == "trace-waterfall" else flame_click
        row, span_id = _clicked_span(click)
        if span_id is None or not raw_trace_id:
            return no_update
        try:
            spans = reader.trace(normalize_trace_id(raw_trace_id), tenant=read_tenant())
        except (FormError, StorageError) as exc:
            return html.P(str(exc), className="hs-message")
        found = find_span_row(spans, row, span_id)
        if found is None:
            return html.P(f"Span {span_id} is no longer in this trace.", className="hs-message")
        return _detail(span_detail(spans, found))


def _clicked_span(click: dict | None) -> tuple[int | None, str | None]:
    """``(row, span_id)`` from a figure click; both figures put them first in ``customdata`` (the flame
    graph's synthetic root has row -1 and no span)."""
    if not click or not click.get("points"):
        return None, None
    data = click["points"][0].get("customdata") or []
    if len(data) < 2 or not data[1]:
        return None, None
    return int(data[0]), str(data[1])


def _no_trace(headline: str, detail: str) -> tuple[Component, go.Figure, go.Figure, go.Figure, str]:
    """Header notice, three placeholder figures and no stage facts for a page without a trace to show."""
    notice = html.Div(className="hs-notice", children=[html.H2(headline), html.P(detail, className="hs-hint")])
    return notice, empty_figure(headline), empty_figure(headline), empty_figure(headline), ""


def _stage_facts(ttft_ns: int | None, tpot_ns: float | None) -> str:
    """TTFT and TPOT of the request's LLM calls, or why they are absent."""
    if ttft_ns is None and tpot_ns is None:
        return "No LLM call in this request reports time to first token or per output token."
    ttft = format_duration_ns(ttft_ns) if ttft_ns is not None else "—"
    tpot = format_duration_ns(tpot_ns) if tpot_ns is not None else "—"
    return f"Time to first token {ttft} · time per output token {tpot}"


def _section_title(text: str, hint: str) -> Component:
    """A card heading with a muted hint beside it."""
    return html.Div(className="hs-section-title", children=[html.H3(text), html.Span(hint, className="hs-hint")])


def _header(summary: TraceSummary) -> Component:
    """Root operation, trace ID and key facts, with a warning when the tree needed repairs."""
    facts = [
        ("Start", format_time_ns(summary.start_ns)),
        ("Duration", format_duration_ns(summary.duration_ns)),
        ("Spans", str(summary.span_count)),
        ("Services", str(summary.service_count)),
        ("Depth", str(summary.depth)),
        ("Errors", str(summary.error_count)),
    ]
    children: list[Component] = [
        html.Div(
            className="hs-trace-title",
            children=[
                html.Span(summary.root_service, className="hs-chip"),
                html.H2(summary.root_name),
                html.Code(summary.trace_id, className="hs-trace-id"),
            ],
        ),
        html.Dl(
            className="hs-facts",
            children=[
                html.Div(
                    className="hs-fact" + (" hs-fact-error" if label == "Errors" and summary.error_count else ""),
                    children=[html.Dt(label), html.Dd(value)],
                )
                for label, value in facts
            ],
        ),
    ]
    problems = []
    if summary.broken_links:
        problems.append(
            f"{summary.broken_links} span(s) shown as extra roots: their parent is missing, is the span "
            "itself, or is part of a parent cycle (marked ⚠)."
        )
    if summary.duplicate_ids:
        problems.append(f"{summary.duplicate_ids} span(s) repeat an earlier span ID.")
    if problems:
        children.append(html.Div(" ".join(problems), className="hs-warning"))
    return html.Div(children)


def _detail(detail: SpanDetail) -> Component:
    """The span detail panel: fields, then attribute, resource and event tables."""
    children: list[Component] = [
        html.H3(detail.title, className="hs-detail-title"),
        _table(detail.fields, ("Field", "Value")),
        html.H4(f"Attributes ({len(detail.attributes)})"),
        _table(detail.attributes, ("Key", "Value")) if detail.attributes else html.P("none", className="hs-hint"),
    ]
    if detail.events:
        children += [
            html.H4(f"Events ({len(detail.events)})"),
            _table(detail.events, ("At", "Name", "Attributes")),
        ]
    children += [
        html.Details(
            [
                html.Summary(f"Resource ({len(detail.resource_attributes)})"),
                _table(detail.resource_attributes, ("Key", "Value")),
            ]
        )
    ]
    return html.Div(children)


def _table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> Component:
    """A compact table of text cells under a header row."""
    return html.Table(
        className="hs-kv",
        children=[
            html.Thead(html.Tr([html.Th(name) for name in header])),
            html.Tbody([html.Tr([html.Td(cell) for cell in row]) for row in rows]),
        ],
    )


PAGE = Page(
    module=__name__,
    path="/trace",
    path_template="/trace/<trace_id>",
    name="Trace",
    layout=layout,
    register_callbacks=register_callbacks,
    title=title,
)
