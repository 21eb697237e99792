"""Component libraries loaded by the browser only when a page draws one of their components.

Dash puts every imported component library's bundle in every page's HTML, to be run before its first paint. Two
serve one page each: dash-ag-grid (Search's results, 1.3 MB) and dash-cytoscape (Topology's graph, 0.5 MB); run on
every page load they cost about 130 ms of the 1k-span trace page's main thread on a quiet machine and more under
load (issue 13's 1 s goal). Here their bundles are marked ``dynamic`` (Dash's resource flag: served on request,
left out of the HTML, as Dash does with source maps and async chunks), and the page gets their addresses and
component names; ``assets/lazy_libraries.js`` stands in for each component and loads its library's script the
first time one is drawn, the way ``dcc.Graph`` loads Plotly. The libraries' own async chunks are untouched.
"""

from __future__ import annotations

import importlib
import json
import os
from types import ModuleType

from dash import Dash
from dash.fingerprint import build_fingerprint

LAZY_LIBRARIES = ("dash_ag_grid", "dash_cytoscape")
"""Component libraries (Python package = JavaScript namespace) loaded on first use; each must be imported by the
app's pages (Dash registers a library's bundle when it is imported)."""
CONFIG_ID = "hs-lazy-libraries"
"""Id of the JSON script element ``assets/lazy_libraries.js`` reads."""
_DEFERRED: dict[str, list[str]] = {}
"""Per library, the bundles (relative package paths) :func:`defer_libraries` marked ``dynamic``: an app built again
in the same process finds them so marked and must still load them on demand."""


def defer_libraries(app: Dash) -> None:
    """Leave the bundles of :data:`LAZY_LIBRARIES` out of ``app``'s HTML and tell the page where to load them.

    Marks each library's main bundles ``dynamic`` in its ``_js_dist`` (process-wide, as Dash reads it from the
    imported package; idempotent, so building apps several times in one process is safe) and adds to the app's
    ``index_string``, before its scripts, a JSON element ``{namespace: {"scripts": [URL, ...], "components":
    [type, ...]}}``: the bundles' fingerprinted URLs (so the browser keeps them a year, as Dash's own) and the
    component types of the package's ``__all__``.
    """
    config = {}
    for namespace in LAZY_LIBRARIES:
        library = importlib.import_module(namespace)
        config[namespace] = {"scripts": _defer(app, library), "components": list(library.__all__)}
    element = f'<script id="{CONFIG_ID}" type="application/json">{json.dumps(config)}</script>'
    if CONFIG_ID not in app.index_string:
        app.index_string = app.index_string.replace("{%scripts%}", element + "\n{%scripts%}")


def _defer(app: Dash, library: ModuleType) -> list[str]:
    """Mark the library's bundles run at start-up (neither ``async`` nor ``dynamic``) ``dynamic``; their URLs as
    Dash builds them for a page (``_dash-component-suites/<namespace>/<fingerprinted path>``, production bundles:
    the UI does not run Dash's dev tools)."""
    deferred = _DEFERRED.setdefault(library.__name__, [])
    for resource in library._js_dist:
        if resource.get("async") is None and not resource.get("dynamic"):
            deferred.append(resource["relative_package_path"])
            resource["dynamic"] = True
    urls = []
    for path in deferred:
        modified = int(os.stat(os.path.join(os.path.dirname(library.__file__), path)).st_mtime)
        fingerprint = build_fingerprint(path, library.__version__, modified)
        urls.append(f"{app.config.requests_pathname_prefix}_dash-component-suites/{library.__name__}/{fingerprint}")
    return urls
