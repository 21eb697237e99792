"""A Dash app whose pages leave out Dash's @babel/polyfill.

Dash puts ``@babel/polyfill`` 7.12 (core-js 2 and regenerator-runtime, 99 kB) before React in every page it serves,
for browsers that lack ES2015+. The browsers Dash 4 supports (it dropped Internet Explorer; React 18) have all that
core-js 2 adds, so the bundle only costs its evaluation on every page load: 77-92 ms of the main thread of the 1k-span
trace page at load 5 (issue 13's 1 s goal), and it adds a ``setImmediate`` that React's scheduler then runs through.
The one part Dash's own bundles still use is a global ``regeneratorRuntime`` (the lazy loader of async components such
as ``dcc.Graph``), which ``assets/regenerator.js`` supplies in the shape they call it.

The page is trimmed where Dash says to customise it: :meth:`dash.Dash.interpolate_index`, which receives the page's
script tags as HTML. ``tests/dashboards/test_polyfill.py`` fails when Dash stops adding the polyfill (then this module
can go) or when a bundle uses ``regeneratorRuntime`` beyond what the asset supplies.
"""

from __future__ import annotations

import re

from dash import Dash

POLYFILL_SCRIPT = re.compile(r'<script src="[^"]*(?:/dash/deps/polyfill@|/@babel/polyfill@)[^"]*"></script>\n?')
"""Dash's script tag of the polyfill: served with the app (``_dash-component-suites/dash/deps/polyfill@7.12.1``, its
version fingerprinted into the name) or from unpkg (``@babel/polyfill@7.12.1``)."""


def without_polyfill(scripts: str) -> str:
    """``scripts`` (a page's script tags, as Dash renders them) without the polyfill's tag."""
    return POLYFILL_SCRIPT.sub("", scripts)


class ModernDash(Dash):
    """A :class:`dash.Dash` whose pages load everything Dash's do except ``@babel/polyfill``; the app's assets must
    include ``regenerator.js`` (``dashboards/assets``)."""

    def interpolate_index(self, **kwargs: str) -> str:
        """Dash's page with the polyfill's script tag removed from its scripts (Dash's documented way of changing
        the page: override this method)."""
        kwargs["scripts"] = without_polyfill(kwargs.get("scripts", ""))
        return super().interpolate_index(**kwargs)
