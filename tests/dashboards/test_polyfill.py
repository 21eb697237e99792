"""Pages without Dash's @babel/polyfill (``dashboards/polyfill.py``): the tag removed is the one Dash adds, and every
script a page can load uses ``regeneratorRuntime`` only as ``assets/regenerator.js`` supplies it. Both fail when a
Dash upgrade changes what they rely on."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import dash
from dash import html

from dashboards.app import build_dash_app
from dashboards.lazy_libraries import LAZY_LIBRARIES
from dashboards.polyfill import POLYFILL_SCRIPT, without_polyfill
from query.service import QueryService

LAZY_LOADER = re.compile(
    r"regeneratorRuntime\.mark\(function (\w+)\(\)\{return regeneratorRuntime\.wrap\(function\((\w+)\)\{for\(;;\)"
    r"switch\(\2\.prev=\2\.next\)\{(.*?)\}\},\1\)\}\)"
)
"""A function compiled by Babel's regenerator as the shim runs it: a ``switch`` over ``context.next`` and nothing
passed to ``wrap`` beyond the body and the function (no try locations)."""
SUPPLIED = {"prev", "next", "stop", "sent"}
"""What ``assets/regenerator.js`` gives a body's context."""


def test_the_polyfill_dash_adds_is_left_out(query: QueryService) -> None:
    plain = dash.Dash(__name__, serve_locally=True)
    plain.layout = html.Div()
    dash_page = plain.server.test_client().get("/").data.decode()
    # Dash still adds it (else dashboards/polyfill.py and assets/regenerator.js can go), and the pattern finds it.
    assert len(POLYFILL_SCRIPT.findall(dash_page)) == 1
    assert "polyfill@" not in without_polyfill(dash_page)

    page = build_dash_app(query).server.test_client().get("/trace").data.decode()
    assert "polyfill@" not in page
    assert "/react@" in page and "/react-dom@" in page and "dash_renderer" in page
    assert "/ui/assets/regenerator.js" in page


def test_bundles_use_regenerator_only_as_the_shim_supplies() -> None:
    checked = 0
    for path in _served_scripts():
        text = path.read_text(encoding="utf-8", errors="replace")
        uses = text.count("regeneratorRuntime")
        if not uses:
            continue
        loaders = LAZY_LOADER.findall(text)
        assert uses == 2 * len(loaders), f"{path}: regeneratorRuntime used beyond mark/wrap of a plain state machine"
        for _, context, body in loaders:
            members = set(re.findall(rf"\b{context}\.(\w+)", body))
            assert members <= SUPPLIED, f"{path}: the state machine uses {members - SUPPLIED}"
        checked += 1
    assert checked >= 3  # dash-renderer, dcc, dash_table today


def _served_scripts() -> list[Path]:
    """The JavaScript files Dash's and the app's component libraries list for pages (run at start, loaded on
    demand or as async chunks), source maps excluded; paths are relative to the package a resource's namespace
    names."""
    libraries = ["dash._dash_renderer", "dash.dcc", "dash.html", "dash.dash_table", *LAZY_LIBRARIES]
    files = []
    for name in libraries:
        for resource in importlib.import_module(name)._js_dist:
            root = Path(importlib.import_module(resource["namespace"]).__file__).parent
            paths = resource.get("relative_package_path") or []
            files += [root / path for path in ([paths] if isinstance(paths, str) else paths) if path.endswith(".js")]
    return files
