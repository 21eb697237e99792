"""Controls the dashboard pages share: labelled fields, titled card sections, and the window row of the
windowed pages (Services, Topology, Stages, Hotspots, Diagnosis) with its scope fields (service, operation,
model, request tenant), the callback inputs and the window it chooses. A windowed page keeps its window and scope
in the URL (``?lookback=1h&service=gateway``), so a link, a bookmark or a reload shows the same rows.

Component ids are prefixed by the page (``<page_id>-lookback``, ``<page_id>-service``, ``<page_id>-url``), so one
builder serves every page and :func:`window_inputs` names the same ids the row was built with.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from urllib.parse import urlencode

from dash import Input, Output, dcc, html
from dash.development.base_component import Component

from dashboards.windows import (
    DEFAULT_ROLLUP_LOOKBACK,
    ROLLUP_LOOKBACKS,
    analysis_window,
    lookback_options,
    rollup_window,
)
from query.service import QueryService
from query.store import AnalysisFilter

PERSIST = {"persistence": True, "persistence_type": "session"}
"""Keyword arguments that keep a control's value across page navigation for the browser session."""
SCOPES = {
    "service": "Service",
    "operation": "Operation",
    "model": "Model",
    "tenant": "Request tenant",
}
"""Scope fields a windowed page may take (its URL keys), with their labels. ``tenant`` is the tenant a request's
spans name (``tenant_id``), not the signed-in one."""


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


def choice_field(label: str, component_id: str, options: Mapping[str, str], value: str) -> Component:
    """A labelled dropdown of ``options`` (value → label) starting at ``value``, with no empty choice."""
    items = [{"label": text, "value": key} for key, text in options.items()]
    return field(label, dcc.Dropdown(id=component_id, options=items, value=value, clearable=False))


def section_title(text: str, hint: str) -> Component:
    """A card heading with a muted hint beside it."""
    return html.H2(className="hs-section-title", children=[text, html.Span(f"  {hint}", className="hs-hint")])


def section(text: str, hint: str, body: Component) -> Component:
    """A card: :func:`section_title` above ``body``."""
    return html.Section(className="hs-card", children=[section_title(text, hint), body])


def window_controls(page_id: str, *fields: Component, lookback: str | None = None) -> Component:
    """The window row: the lookback dropdown (id ``<page_id>-lookback``, starting at ``lookback`` when it is a
    known key), then ``fields`` (built with :func:`field`, ids ``<page_id>-<name>``), then a refresh button
    (``<page_id>-refresh``)."""
    chosen = dcc.Dropdown(
        id=f"{page_id}-lookback",
        options=lookback_options(),
        value=lookback if lookback in ROLLUP_LOOKBACKS else DEFAULT_ROLLUP_LOOKBACK,
        clearable=False,
    )
    return html.Div(
        className="hs-card hs-field-row hs-window-row",
        children=[
            field("Window", chosen),
            *fields,
            html.Button("Refresh", id=f"{page_id}-refresh", className="hs-button"),
        ],
    )


def text_input(component_id: str, value: str | None, placeholder: str) -> Component:
    """A text field that reports on Enter or blur (debounced)."""
    return dcc.Input(
        id=component_id,
        type="text",
        value=value,
        placeholder=placeholder,
        debounce=True,
        spellCheck=False,
        className="hs-input",
    )


def scope_fields(page_id: str, names: Sequence[str], query: Mapping[str, str]) -> list[Component]:
    """Text fields for the scopes ``names`` (keys of :data:`SCOPES`; ids ``<page_id>-<name>``), filled from the
    URL's ``query``; empty means any."""
    return [field(SCOPES[name], text_input(f"{page_id}-{name}", query.get(name) or None, "any")) for name in names]


def window_page(
    page_id: str,
    *body: Component,
    fields: Sequence[Component] = (),
    query: Mapping[str, str] | None = None,
    scopes: Sequence[str] = (),
) -> Component:
    """A windowed page (class ``hs-page hs-<page_id>``): the :func:`window_controls` row with ``fields`` and the
    :func:`scope_fields` of ``scopes``, both starting from the URL's ``query``; the page's message line (id
    ``<page_id>-message``, an alert); ``body``; and the page's URL (id ``<page_id>-url``, see :func:`page_url`)."""
    query = query or {}
    return html.Div(
        className=f"hs-page hs-{page_id}",
        children=[
            window_controls(page_id, *fields, *scope_fields(page_id, scopes, query), lookback=query.get("lookback")),
            html.Div(id=f"{page_id}-message", className="hs-message", role="alert"),
            *body,
            dcc.Location(id=f"{page_id}-url", refresh=False),
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


def url_output(page_id: str) -> Output:
    """The output a windowed page's callback writes its URL's query string to (:func:`page_url`)."""
    return Output(f"{page_id}-url", "search")


def page_url(lookback: str | None, **scope: str | None) -> str:
    """The query string (with ``?``, or ``""``) of a window and scope; empty values are left out."""
    values = {"lookback": lookback} | scope
    kept = {key: value for key, value in values.items() if value}
    return f"?{urlencode(kept)}" if kept else ""


def scoped(where: AnalysisFilter, **scope: str | None) -> AnalysisFilter:
    """``where`` narrowed to a scope (:data:`SCOPES` keys; empty values leave it open): ``service`` and
    ``operation`` as :class:`~storage.analysis_store.AnalysisFilter` takes them, ``model``, and ``tenant`` as its
    ``request_tenant``."""
    chosen = {key: (value or "").strip() or None for key, value in scope.items()}
    return replace(
        where,
        service=chosen.get("service"),
        operation=chosen.get("operation"),
        model=chosen.get("model"),
        request_tenant=chosen.get("tenant"),
    )


def chosen_rollup_window(query: QueryService, lookback: str | None, tenant: str | None) -> tuple[int, int, int]:
    """``(start_ns, end_ns, step_s)`` of a lookback choice (None: the default) ending now, "all" spanning the
    tenant's stored rollups (:func:`dashboards.windows.rollup_window`). Raises what storage raises."""
    stored = query.rollup_time_range(tenant=tenant)
    return rollup_window(lookback or DEFAULT_ROLLUP_LOOKBACK, time.time_ns(), stored)


def window_filter(query: QueryService, lookback: str | None, tenant: str | None) -> tuple[AnalysisFilter, int]:
    """The :class:`AnalysisFilter` window of a lookback choice and a bucket step in seconds (about
    :data:`dashboards.windows.TARGET_POINTS` buckets over the stored span range for "all")."""
    stored = query.rollup_time_range(tenant=tenant)
    start, end, step_s = analysis_window(lookback or DEFAULT_ROLLUP_LOOKBACK, time.time_ns(), stored)
    return AnalysisFilter(start_ns=start, end_ns=end), step_s
