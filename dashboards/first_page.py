"""The page container of the app shell, with the page the browser is opening already in it.

Dash's pages router fills ``dash.page_container`` in a callback: the browser loads the shell's layout
(``_dash-layout``), its ``dcc.Location`` then reports the address, and only that second round trip brings the page.
The layout request does not carry the page's address, but its ``Referer`` does (the document's URL, which browsers
send whole to the same origin under the default referrer policy). When it names a page of this app, the container
here holds that page's layout, its title, and a ``dcc.Location`` already at that address: the Location then reports
no change when it mounts, so the router does not run and the page is drawn one round trip sooner (on the 1k-span
trace page about 0.1-0.2 s of the 1 s goal, issue 13). Without a usable ``Referer`` the container is empty and the
router fills it, as before.

The page is found and called exactly as Dash's router does (``dash._pages._path_to_page`` and
``_parse_query_string``, private helpers of the installed Dash, 4.x), so both ways give the same page.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import flask
from dash import Dash, dcc, html
from dash._pages import _parse_query_string, _path_to_page
from dash.dash import _ID_CONTENT, _ID_DUMMY, _ID_LOCATION, _ID_STORE
from dash.development.base_component import Component

LAYOUT_ROUTE = "_dash-layout"
"""The route Dash's renderer fetches the app's layout from, once per page load (below ``routes_pathname_prefix``)."""


def page_container(app: Dash) -> Component:
    """Dash's page container (same ids and parts as ``dash.page_container``), holding the page the current
    ``_dash-layout`` request's ``Referer`` names, else empty (also outside a request and for any other route, such
    as the first request's callback validation, which calls the app's layout too).

    Args:
        app: the app whose pages (Dash's page registry) and URL prefix the address is matched against.

    Returns:
        The container: ``dcc.Location``, the page's content, the title store and the title target.
    """
    address = _layout_referrer(app)
    location = dcc.Location(id=_ID_LOCATION, refresh="callback-nav")
    content, store = None, None
    if address is not None:
        pathname, search = address
        page, path_variables = _path_to_page(app.strip_relative_path(pathname))
        if page:
            layout, title = page["layout"], page["title"]
            if callable(layout):
                layout = layout(**{**(path_variables or {}), **_parse_query_string(search)})
            if callable(title):
                title = title(**(path_variables or {}))
            location = dcc.Location(id=_ID_LOCATION, refresh="callback-nav", pathname=pathname, search=search)
            content, store = layout, {"title": title}
    return html.Div(
        [
            location,
            html.Div(content, id=_ID_CONTENT, disable_n_clicks=True),
            dcc.Store(id=_ID_STORE, data=store),
            html.Div(id=_ID_DUMMY, disable_n_clicks=True),
        ]
    )


def _layout_referrer(app: Dash) -> tuple[str, str] | None:
    """Path and query string (``"?a=1"`` or ``""``, as ``window.location.search``) of the page that asked for the
    layout, when this is a ``_dash-layout`` request referred by an address under the app's prefix."""
    if not flask.has_request_context() or flask.request.path != app.config.routes_pathname_prefix + LAYOUT_ROUTE:
        return None
    referrer = flask.request.referrer
    if not referrer:
        return None
    parts = urlsplit(referrer)
    if parts.netloc != flask.request.host or not parts.path.startswith(app.config.requests_pathname_prefix):
        return None
    return parts.path, f"?{parts.query}" if parts.query else ""
