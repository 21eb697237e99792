"""The Dash UI: an app factory over the query room (:class:`query.service.QueryService`).

The app is meant to be mounted under ``/ui`` of the FastAPI app::

    dash_app = build_dash_app(query)                       # requests_pathname_prefix="/ui/"
    api.mount("/ui", WSGIMiddleware(dash_app.server))      # a2wsgi; Flask then sees paths below /ui

Dash routes on ``/`` (``routes_pathname_prefix``) because the mount strips ``/ui`` from the path, while
the browser is told every URL with ``/ui/`` in front (``requests_pathname_prefix``).
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import dash

# Imported whole here, before any thread serves a page: Plotly reads pandas (an optional import) from sys.modules
# when it is there, and took a half-imported one while the trace pipeline's first insert (clickhouse-connect's
# Arrow insert) was importing it on its own thread, so the first page load answered 500 (seen in CI).
import pandas  # noqa: F401
from dash import ALL, Dash, Input, Output, State, dcc, html, no_update
from dash.development.base_component import Component

from dashboards.first_page import page_container
from dashboards.lazy_libraries import defer_libraries
from dashboards.pages import (
    QUERY_CONFIG,
    Page,
    compare,
    conversations,
    diagnosis,
    hotspots,
    incidents,
    search,
    services,
    stages,
    throughput,
    topology,
    trace,
)
from dashboards.polyfill import ModernDash
from dashboards.query_form import FormError, normalize_trace_id
from query.service import QueryService

PAGES: tuple[Page, ...] = (
    search.PAGE,
    trace.PAGE,
    services.PAGE,
    topology.PAGE,
    stages.PAGE,
    conversations.PAGE,
    hotspots.PAGE,
    diagnosis.PAGE,
    incidents.PAGE,
    throughput.PAGE,
    compare.PAGE,
)
"""Pages in nav bar order; a new page is one module under ``dashboards/pages`` plus one entry here."""

ASSETS = Path(__file__).with_name("assets")
ASSETS_MAX_AGE_S = 365 * 24 * 3600
"""How long a browser keeps the UI's own assets without asking again. Safe because Dash links each asset with its
modification time (``?m=``), so a changed file is a new URL; without it every page load waits on a revalidation
round trip per asset before its scripts run (Flask's default for static files)."""


def build_dash_app(query: QueryService, *, requests_pathname_prefix: str = "/ui/") -> Dash:
    """A new Dash app showing what ``query`` reads.

    Safe to call several times in one process (tests do): Dash's page registry is global, so every call
    re-registers the same pages (overwriting their entries), while callbacks, which carry ``query``, are bound
    to this app only.

    Args:
        query: the query room every page reads through (its store, analysis, kept trace views, diagnosis and
            engine metrics), the same one the REST API and the SLO evaluator use; called from Flask worker
            threads, so thread-safe. Kept in the Flask config under :data:`dashboards.pages.QUERY_CONFIG` for
            layout functions.
        requests_pathname_prefix: URL path the browser sees the app under, with slashes on both ends;
            ``"/"`` when the Flask server is served on its own.

    Returns:
        The app; serve ``app.server`` (a Flask WSGI app).
    """
    app = ModernDash(
        __name__,
        use_pages=True,
        pages_folder="",
        requests_pathname_prefix=requests_pathname_prefix,
        routes_pathname_prefix="/",
        assets_folder=str(ASSETS),
        serve_locally=True,
        title="Hotspan",
        update_title=None,
    )
    for order, page in enumerate(PAGES):
        dash.register_page(
            page.module,
            path=page.path,
            path_template=page.path_template,
            name=page.name,
            title=page.title,
            layout=page.layout,
            order=order,
        )
    defer_libraries(app)
    app.server.config[QUERY_CONFIG] = query
    app.server.config["SEND_FILE_MAX_AGE_DEFAULT"] = ASSETS_MAX_AGE_S
    # A function: each page load's layout holds the page being opened (dashboards.first_page).
    app.layout = lambda: _shell(app)
    _register_shell_callbacks(app)
    for page in PAGES:
        page.register_callbacks(app, query)
    return app


def _shell(app: Dash) -> Component:
    """Nav bar (brand, page links, trace ID lookup) above the current page (already in it when the layout request
    names it: :func:`dashboards.first_page.page_container`)."""
    links = [
        dcc.Link(
            page.name,
            href=app.get_relative_path(page.path),
            id={"type": "nav-link", "index": page.path},
            className="hs-nav-link",
        )
        for page in PAGES
    ]
    return html.Div(
        className="hs-app",
        children=[
            dcc.Location(id="app-url", refresh="callback-nav"),
            html.Header(
                className="hs-nav",
                children=[
                    dcc.Link(
                        [html.Span("◆", className="hs-logo"), "Hotspan"],
                        href=app.get_relative_path("/"),
                        className="hs-brand",
                    ),
                    html.Nav(links, className="hs-nav-links"),
                    html.Div(
                        className="hs-lookup",
                        children=[
                            dcc.Input(
                                id="nav-lookup",
                                type="text",
                                placeholder="Lookup by trace ID…",
                                debounce=True,
                                spellCheck=False,
                                autoComplete="off",
                            ),
                            html.Div(id="nav-lookup-error", className="hs-lookup-error"),
                        ],
                    ),
                ],
            ),
            html.Main(page_container(app), className="hs-main"),
        ],
    )


def _register_shell_callbacks(app: Dash) -> None:
    """Highlight the current page's nav link; open the trace typed into the lookup box."""

    # In the browser: on a page load this answer would otherwise be a second request beside the page's own.
    # The page a path belongs to is the one its first segment below the app's prefix names, else the first page.
    app.clientside_callback(
        f"""function (pathname) {{
            const prefix = {json.dumps(app.config.requests_pathname_prefix)};
            const path = pathname || "";
            const below = path.startsWith(prefix) ? path.slice(prefix.length) : path;
            const first = below.replace(/^\\/+/, "").split("/")[0];
            const paths = dash_clientside.callback_context.outputs_list.map((output) => output.id.index);
            const trim = (page) => page.replace(/^\\/+|\\/+$/g, "");
            const active = paths.find((page) => trim(page) === first) || {json.dumps(PAGES[0].path)};
            return paths.map((page) => (page === active ? "hs-nav-link active" : "hs-nav-link"));
        }}""",
        Output({"type": "nav-link", "index": ALL}, "className"),
        Input("app-url", "pathname"),
    )

    @app.callback(
        Output("app-url", "href"),
        Output("nav-lookup-error", "children"),
        Input("nav-lookup", "n_submit"),
        State("nav-lookup", "value"),
        prevent_initial_call=True,
    )
    def lookup_trace(_submits: int | None, text: str | None) -> tuple[object, str]:
        # Like Jaeger, the address follows what the page shows: a malformed ID opens its (URL-quoted) trace
        # page too, which says why it cannot be shown; only an empty box stays put.
        try:
            path = normalize_trace_id(text)
        except FormError as exc:
            if not (text or "").strip():
                return no_update, str(exc)
            path = quote(text.strip(), safe="")
        return app.get_relative_path(f"/trace/{path}"), ""
