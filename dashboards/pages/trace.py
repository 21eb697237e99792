"""Trace page (``/ui/trace/<trace_id>``): header facts, where the request's time went by stage, the span tree and
its timeline (virtualised, collapsible, zoomable from a minimap, searchable), a span's detail and the flame graph.
``/ui/trace`` alone explains how to open one.

Everything comes from one :class:`~query.trace_model.TraceView`, read once when the page loads
(:meth:`query.trace_view_cache.TraceViews.load`); scrolling, collapsing, searching, zooming, a span's detail and the
flame graph read the kept view (:meth:`~query.trace_view_cache.TraceViews.get`), never storage. The timeline is drawn
in the browser (``assets/trace_timeline.js``) from windows of rows (:func:`query.trace_rows.window`).
"""

from __future__ import annotations

import threading
import uuid
from urllib.parse import unquote

import flask
from dash import ALL, ClientsideFunction, Dash, Input, Output, State, ctx, dcc, get_relative_path, html, no_update
from dash.development.base_component import Component

from dashboards.conversation_panels import conversation_href
from dashboards.pages import Page, query_room
from dashboards.query_form import FormError, normalize_trace_id
from dashboards.static_html import static_html
from dashboards.tenancy import read_tenant
from dashboards.trace_panels import (
    agent_graph_panel,
    flame_figure,
    group_detail,
    header,
    page_meta,
    request_facts,
    span_detail,
    stage_panel,
)
from query.service import QueryService
from query.store import StorageError, short_trace_id
from query.trace_flame import trace_flame
from query.trace_model import TraceView
from query.trace_rows import MAX_WINDOW_ROWS, Expansion, lane_window, position_of, window

LANE_BINS = 1_200
"""Bins of the stage lane above the timeline (about one per pixel of a wide screen)."""
_GRAPH_CONFIG = {"displaylogo": False, "responsive": True}
FLAME_ID = {"type": "trace-flame", "index": 0}
"""The flame graph's id: a pattern so its click callback can exist before the graph does."""
READ_AHEAD_THREADS = 2
"""Trace reads started ahead of the page's layout request at most at once (more page loads read in the layout)."""
NO_TRACE = "No trace."
"""What the flame graph's box says without a trace (none selected, or it is gone)."""
_DETAIL_HINT = "Click a row of the timeline (anywhere on it) or a tile of the flame graph to see its span."


def layout(trace_id: str | None = None, **_query: str) -> Component:
    """The trace page, with the trace read and its model built here: Dash renders a page's layout in a callback
    of its own (the pages router), so loading in it spares a second round trip before the first paint.
    ``trace_id`` comes from the URL, still percent-encoded (Dash passes path variables as they are), and may be
    malformed (then the header says why); called with none for Dash's callback validation, it reads nothing."""
    loading = flask.has_request_context()
    head, stages, meta = _load(unquote(trace_id) if trace_id else None) if loading else (None, None, None)
    stores = [
        dcc.Store(id="trace-meta", data=meta),
        dcc.Store(id="trace-request"),
        dcc.Store(id="trace-rows"),
        dcc.Store(id="trace-selected"),
        dcc.Store(id="trace-painted"),
        dcc.Store(id="trace-flame-wanted"),
    ]
    header_card = html.Div(
        className="hs-card hs-trace-header",
        children=[html.Div(id="trace-header", children=head), html.Div(id="trace-request-facts")],
    )
    if trace_id and meta is None:
        # No trace to draw (unknown, malformed, ambiguous): the header says why, and no empty panel waits for it
        # (the flame graph's box would say "Loading…" for good: only a drawn timeline asks for it). Called without
        # an ID, by Dash's callback validation among others (in a request), the layout stays whole.
        return html.Div(className="hs-page hs-trace", children=[*stores, header_card])
    return html.Div(
        className="hs-page hs-trace",
        children=[
            *stores,
            header_card,
            html.Section(
                className="hs-card",
                children=[
                    _section_title("Stages", "where the trace's time went, along the critical path of each root"),
                    html.Div(id="trace-stages", children=stages),
                ],
            ),
            html.Div(
                className="hs-trace-body",
                children=[
                    html.Section(
                        className="hs-card hs-timeline",
                        children=[
                            _section_title(
                                "Timeline",
                                "bars coloured by service; hatched: the span's own untraced time; dark line: "
                                "critical path; ▸ expands",
                            ),
                            html.Div(id="trace-timeline", className="hs-tl"),
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
                    _section_title(
                        "Agent graph",
                        "who called which model, tool and agent; marked: on the critical path",
                    ),
                    # Filled after the first paint (trace-painted), as the request facts: at 100k spans the graph
                    # costs 0.4 s, which the timeline need not wait for.
                    html.Div(
                        id="trace-agent-graph", children=html.P("Loading…" if meta else NO_TRACE, className="hs-hint")
                    ),
                ],
            ),
            html.Section(
                className="hs-card",
                children=[
                    _section_title(
                        "Flame graph",
                        "width = self time of a tile and everything below it; large traces merge siblings by "
                        "service and operation; click a tile for its (longest) span",
                    ),
                    # Filled when it first comes near the viewport (trace-flame-wanted, set by the timeline widget
                    # after its first paint): Plotly's script (4.8 MB) loads with the first graph on a page, and
                    # run right after the paint it held up the page's first interactions for 100-150 ms.
                    html.Div(
                        id="trace-flame-box",
                        children=html.P("Loading…" if meta else NO_TRACE, className="hs-hint"),
                    ),
                ],
            ),
        ],
    )


def title(trace_id: str | None = None) -> str:
    """Browser tab title."""
    return f"Trace {short_trace_id(trace_id)} · Hotspan" if trace_id else "Trace · Hotspan"


def register_callbacks(app: Dash, query: QueryService) -> None:
    """Wire the page: serve windows of rows, the flame graph and span details from the view the layout read
    (:func:`layout`), through the query room's kept trace views; read a trace ahead when its page's HTML is asked
    for (:func:`_read_ahead`)."""
    _read_ahead(app, query)

    @app.callback(
        Output("trace-agent-graph", "children"),
        Input("trace-painted", "data"),
        State("trace-meta", "data"),
        prevent_initial_call=True,
    )
    def load_agent_graph(_painted: str | None, meta: dict | None) -> Component:
        view = _kept(meta)
        return static_html(agent_graph_panel(view)) if view is not None else html.P(NO_TRACE, className="hs-hint")

    @app.callback(
        Output("trace-request-facts", "children"),
        Input("trace-painted", "data"),
        State("trace-meta", "data"),
        prevent_initial_call=True,
    )
    def load_facts(_painted: str | None, meta: dict | None) -> Component:
        view = _kept(meta)
        if view is None:
            return html.Div()
        conversation = view.summary["conversation_id"]
        if not conversation:
            return request_facts(view)
        link = dcc.Link(
            str(conversation),
            href=conversation_href(get_relative_path("/").rstrip("/"), str(conversation)),
            id="trace-conversation",
            className="hs-mono",
        )
        return html.Div([html.P(["A turn of conversation ", link], className="hs-hint"), request_facts(view)])

    @app.callback(
        Output("trace-flame-box", "children"),
        Input("trace-flame-wanted", "data"),
        State("trace-meta", "data"),
        prevent_initial_call=True,
    )
    def load_flame(_wanted: str | None, meta: dict | None) -> Component:
        view = _kept(meta)
        if view is None:
            return html.P(NO_TRACE, className="hs-hint")
        return dcc.Graph(
            id=FLAME_ID, className="hs-trace-flame", figure=flame_figure(trace_flame(view)), config=_GRAPH_CONFIG
        )

    app.clientside_callback(
        ClientsideFunction(namespace="hotspan", function_name="renderTrace"),
        Output("trace-painted", "data"),
        Input("trace-meta", "data"),
        Input("trace-rows", "data"),
    )

    @app.callback(Output("trace-rows", "data"), Input("trace-request", "data"), prevent_initial_call=True)
    def rows(request: dict | None) -> dict | object:
        if not request:
            return no_update
        view = _kept(request)
        if view is None:
            return no_update
        answer: dict[str, object] = {"seq": request.get("seq"), "trace_id": view.trace_id}
        lane = request.get("lane") or [0, view.duration_ns]
        answer["lane"] = lane_window(view, int(lane[0]), int(lane[1]), LANE_BINS)
        answer["lane_range"] = lane
        if request.get("lane_only"):
            return answer
        try:
            expansion = Expansion.parse(request.get("expansion"))
        except (TypeError, ValueError):
            return no_update
        offset = max(int(request.get("offset") or 0), 0)
        limit = min(max(int(request.get("limit") or 1), 1), MAX_WINDOW_ROWS)
        scroll_to = None
        if request.get("scroll_to_span") is not None:
            scroll_to = position_of(view, expansion, int(request["scroll_to_span"]))
        page = window(view, expansion, offset, limit)
        if request.get("scroll_to_match") and page["matches"]["positions"]:  # type: ignore[index]
            scroll_to = page["matches"]["positions"][0]  # type: ignore[index]
            if not offset <= scroll_to < offset + limit:
                page = window(view, expansion, max(scroll_to - limit // 3, 0), limit)
        answer["rows"] = page
        answer["scroll_to"] = scroll_to
        return answer

    @app.callback(
        Output("trace-span-detail", "children", allow_duplicate=True),
        Input("trace-selected", "data"),
        Input({"type": "trace-flame", "index": ALL}, "clickData"),
        Input({"type": "trace-member", "span": ALL}, "n_clicks"),
        State("trace-meta", "data"),
        prevent_initial_call=True,
    )
    def show_span(
        selected: dict | None, flame_clicks: list[dict | None], members: list, meta: dict | None
    ) -> Component | object:
        view = _kept(meta)
        if view is None:
            return no_update
        aggregate = False
        trigger = ctx.triggered_id
        if trigger == "trace-selected" and selected:
            span, aggregate = int(selected.get("span", -1)), bool(selected.get("aggregate"))
        elif isinstance(trigger, dict) and trigger.get("type") == "trace-flame" and any(flame_clicks):
            click = next(click for click in flame_clicks if click)
            span = int((click["points"][0].get("customdata") or [-1])[0]) if click.get("points") else -1
        elif isinstance(trigger, dict) and trigger.get("type") == "trace-member" and any(members):
            span = int(trigger["span"])
        else:
            return no_update
        if not 0 <= span < view.size:
            return no_update
        return group_detail(view, span) if aggregate else span_detail(view, span)


def _read_ahead(app: Dash, query: QueryService) -> None:
    """When the browser asks for a trace page's HTML (``<prefix>trace/<32-hex ID>``), start reading and modelling
    that trace in a thread. The layout request that reads it (:func:`layout`) comes only once the page's scripts
    have run (about 0.3-1 s later on two busy cores); by then the view is kept, or being built, and
    :meth:`query.trace_view_cache.TraceViews.load` waits for that one build instead of reading again (still one read per
    page load). At most :data:`READ_AHEAD_THREADS` at once; beyond that, or for a short or malformed ID (which
    the layout resolves or explains), the layout reads as before. Errors are left for the layout to report."""
    prefix = app.config.routes_pathname_prefix + "trace/"
    slots = threading.BoundedSemaphore(READ_AHEAD_THREADS)

    def read(trace_id: str, tenant: str | None) -> None:
        try:
            query.views.load(trace_id, tenant=tenant)
        except (StorageError, ValueError):
            pass  # the layout's own read reports it
        finally:
            slots.release()

    @app.server.before_request
    def start() -> None:
        path = flask.request.path
        if flask.request.method != "GET" or not path.startswith(prefix):
            return
        raw = unquote(path.removeprefix(prefix)).strip()
        if len(raw) != 32:
            return
        try:
            trace_id = normalize_trace_id(raw)
        except FormError:
            return
        if slots.acquire(blocking=False):
            threading.Thread(target=read, args=(trace_id, read_tenant()), name="trace-read-ahead", daemon=True).start()


def _load(raw_trace_id: str | None) -> tuple[Component, Component | None, dict | None]:
    """Header, stage panel and the timeline's starting data of a trace read now (one read per page load), or a
    notice saying why there is none."""
    if not raw_trace_id:
        return _notice("No trace selected", "Open one from Search, or paste its ID in the lookup box."), None, None
    views, tenant = query_room().views, read_tenant()
    try:
        # A short ID (a prefix a page showed) names the one stored trace it starts, when it is not itself an ID.
        found = views.ids_starting(raw_trace_id, tenant=tenant, limit=10)
        trace_id = normalize_trace_id(raw_trace_id) if len(found) != 1 else found[0]
        view = views.load(trace_id, tenant=tenant)
        if view is None and len(found) == 1 and trace_id != found[0]:
            view = views.load(found[0], tenant=tenant)
    except FormError as exc:
        if found:
            return _ambiguous(raw_trace_id, found), None, None
        return _notice("Cannot show this trace", str(exc)), None, None
    except (StorageError, ValueError) as exc:
        return _notice("Cannot show this trace", str(exc)), None, None
    if view is None:
        if len(found) > 1:
            return _ambiguous(raw_trace_id, found), None, None
        return _notice(f"Trace {trace_id} not found", "It may not be stored yet, or it has expired."), None, None
    compare = dcc.Link(
        "Compare with another trace →",
        href=get_relative_path("/compare") + f"?a={view.trace_id}",
        id="trace-compare-link",
        className="hs-drill",
    )
    # Header and stage panel are drawn once and never updated: one component each for Dash (dashboards/static_html).
    head, stages = static_html(header(view)), static_html(stage_panel(view))
    return html.Div([head, compare]), stages, page_meta(view, uuid.uuid4().hex)


def _kept(data: dict | None) -> TraceView | None:
    """The kept view of the trace a store names (``trace_id``), for the caller's tenant."""
    if not data or not data.get("trace_id"):
        return None
    try:
        return query_room().views.get(str(data["trace_id"]), tenant=read_tenant())
    except (StorageError, ValueError):
        return None


def _ambiguous(prefix: str, trace_ids: list[str]) -> Component:
    """The traces a short ID could mean, each a link (at most ten; a longer prefix narrows them)."""
    links = [html.Li(dcc.Link(tid, href=get_relative_path(f"/trace/{tid}"), className="hs-mono")) for tid in trace_ids]
    return html.Div(
        className="hs-card hs-notice",
        children=[html.H3(f"{prefix} starts several traces"), html.Ul(links, id="trace-candidates")],
    )


def _notice(headline: str, detail: str) -> Component:
    return html.Div(className="hs-notice", children=[html.H2(headline), html.P(detail, className="hs-hint")])


def _section_title(text: str, hint: str) -> Component:
    """A card heading with a muted hint beside it (static: one component for Dash)."""
    return static_html(
        html.Div(className="hs-section-title", children=[html.H3(text), html.Span(hint, className="hs-hint")])
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
