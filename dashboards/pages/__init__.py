"""The UI's pages, one module per page, each exporting ``PAGE``: a :class:`Page`.

Pages do not call ``dash.register_page`` at import time: Dash's page registry is process-global, and
the app is built by a factory (possibly several times in one process), so ``build_dash_app`` registers
every :class:`Page` itself and wires its callbacks to that app's query room (:class:`query.service.QueryService`:
every page reads through it, as the REST API and the SLO alerts do).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import flask
from dash import Dash
from dash.development.base_component import Component

from query.service import QueryService

QUERY_CONFIG = "HOTSPAN_QUERY"
"""Key of the app's Flask config holding its :class:`~query.service.QueryService`, set by
:func:`dashboards.app.build_dash_app`."""


@dataclass(frozen=True)
class Page:
    """One page of the UI.

    Attributes:
        module: the page module's ``__name__`` (its key in Dash's page registry).
        path: route below the app prefix, e.g. ``"/"`` or ``"/trace"``.
        name: nav bar label.
        layout: builds the page's components; gets the ``path_template`` variables and query-string
            values as keyword arguments, and is also called with none (Dash's callback validation).
        register_callbacks: wires the page's callbacks to an app and its query room.
        title: browser tab title, or a function of the path variables returning it.
        path_template: route with variables, e.g. ``"/trace/<trace_id>"``; ``path`` still matches alone.
    """

    module: str
    path: str
    name: str
    layout: Callable[..., Component]
    register_callbacks: Callable[[Dash, QueryService], None]
    title: str | Callable[..., str]
    path_template: str | None = None


def query_room() -> QueryService:
    """The current app's query room (call inside a callback or a layout function)."""
    return flask.current_app.config[QUERY_CONFIG]
