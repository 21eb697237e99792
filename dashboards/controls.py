"""Controls the dashboard pages share: labelled fields, titled card sections, and the window row of the
windowed pages (Services, Topology, Stages, Hotspots, Diagnosis) with the callback inputs and the window it
chooses.

Component ids are prefixed by the page (``<page_id>-lookback``, ``<page_id>-refresh``), so one builder serves
every page and :func:`window_inputs` names the same ids the row was built with.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from dash import Input, dcc, html
from dash.development.base_component import Component

from dashboards.windows import DEFAULT_ROLLUP_LOOKBACK, analysis_window, lookback_options, rollup_window
from storage.analysis_store import AnalysisFilter
from storage.reader import TraceReader
from storage.rollup_reader import RollupReader

PERSIST = {"persistence": True, "persistence_type": "session"}
"""Keyword arguments that keep a control's value across page navigation for the browser session."""


def field(label: str, control: Component, hint: str | None = None) -> Component:
    """A labelled form control with an optional hint below it."""
    children = [html.Label(label, className="hs-label"), control]
    if hint:
        children.append(html.Div(hint, className="hs-hint"))
    return html.Div(className="hs-field", children=children)


def radio_field(label: str, component_id: str, options: dict[str, str], value: str) -> Component:
    """A labelled row of radio buttons (``options``: value → label), kept across navigation."""
    items = [{"label": f" {text}", "value": key} for key, text in options.items()]
    return field(label, dcc.RadioItems(id=component_id, options=items, value=value, inline=True, **PERSIST))


def section_title(text: str, hint: str) -> Component:
    """A card heading with a muted hint beside it."""
    return html.H2(className="hs-section-title", children=[text, html.Span(f"  {hint}", className="hs-hint")])


def section(text: str, hint: str, body: Component) -> Component:
    """A card: :func:`section_title` above ``body``."""
    return html.Section(className="hs-card", children=[section_title(text, hint), body])


def window_controls(page_id: str, *fields: Component) -> Component:
    """The window row: the lookback dropdown (id ``<page_id>-lookback``), then ``fields`` (built with
    :func:`field`, ids ``<page_id>-<name>``), then a refresh button (``<page_id>-refresh``)."""
    lookback = dcc.Dropdown(
        id=f"{page_id}-lookback",
        options=lookback_options(),
        value=DEFAULT_ROLLUP_LOOKBACK,
        clearable=False,
        **PERSIST,
    )
    return html.Div(
        className="hs-card hs-field-row",
        children=[
            field("Window", lookback),
            *fields,
            html.Button("Refresh", id=f"{page_id}-refresh", className="hs-button"),
        ],
    )


def window_page(page_id: str, *body: Component, fields: Sequence[Component] = ()) -> Component:
    """A windowed page (class ``hs-page hs-<page_id>``): the :func:`window_controls` row with ``fields``, the
    page's message line (id ``<page_id>-message``, an alert), then ``body``."""
    return html.Div(
        className=f"hs-page hs-{page_id}",
        children=[
            window_controls(page_id, *fields),
            html.Div(id=f"{page_id}-message", className="hs-message", role="alert"),
            *body,
        ],
    )


def window_inputs(page_id: str, *names: str) -> list[Input]:
    """Callback inputs for a :func:`window_controls` row, in the row's order: the lookback value, the
    ``value`` of each ``<page_id>-<name>`` field, then the refresh button's ``n_clicks``."""
    return [
        Input(f"{page_id}-lookback", "value"),
        *(Input(f"{page_id}-{name}", "value") for name in names),
        Input(f"{page_id}-refresh", "n_clicks"),
    ]


def chosen_rollup_window(reader: RollupReader, lookback: str | None, tenant: str | None) -> tuple[int, int, int]:
    """``(start_ns, end_ns, step_s)`` of a lookback choice (None: the default) ending now, "all" spanning the
    tenant's stored rollups (:func:`dashboards.windows.rollup_window`). Raises what storage raises."""
    stored = reader.rollup_time_range(tenant=tenant)
    return rollup_window(lookback or DEFAULT_ROLLUP_LOOKBACK, time.time_ns(), stored)


def window_filter(reader: TraceReader, lookback: str | None, tenant: str | None) -> tuple[AnalysisFilter, int]:
    """The :class:`AnalysisFilter` window of a lookback choice and a bucket step in seconds (about
    :data:`dashboards.windows.TARGET_POINTS` buckets over the stored span range for "all")."""
    stored = reader.rollup_time_range(tenant=tenant) if isinstance(reader, RollupReader) else None
    start, end, step_s = analysis_window(lookback or DEFAULT_ROLLUP_LOOKBACK, time.time_ns(), stored)
    return AnalysisFilter(start_ns=start, end_ns=end), step_s
