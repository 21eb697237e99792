"""Incidents page (``/ui/incidents``): what the incident lifecycle (:mod:`incidents.lifecycle`) opened over a window,
newest first, and one incident in detail (``?incident=<id>``, else the newest): its deviating series against their
baselines, the diagnosis of its window against the baseline window, neighbours, links to example traces. Scoped to
a service when given (kept in the URL)."""

from __future__ import annotations

from urllib.parse import urlencode

from dash import Dash, Input, Output, dcc, html
from dash.development.base_component import Component

from dashboards.controls import chosen_rollup_window, page_url, section, url_output, window_inputs, window_page
from dashboards.incident_panels import incident_detail, incident_table
from dashboards.links import drilldown, search_href
from dashboards.pages import Page
from dashboards.tenancy import read_tenant
from query.service import QueryService
from query.store import Incident, IncidentQuery, StorageError

SCOPE = ("service",)
"""The scope the Incidents page takes: incidents where this service deviated."""
LISTED = 200
"""Most incidents listed."""


def layout(**query: str) -> Component:
    """Window and scope (from the URL), the list and the chosen incident; the callback fills them."""
    return window_page(
        "incidents",
        section(
            "Incidents",
            "series that left their robust baseline (median and MAD of the trailing or day-earlier minutes), or"
            " diagnosis findings new against the baseline window's",
            dcc.Loading(html.Div(id="incidents-list"), type="dot"),
        ),
        section(
            "Incident", "its series, the diagnosis of its window against the baseline", html.Div(id="incidents-detail")
        ),
        dcc.Store(id="incidents-chosen", data=query.get("incident") or None),
        query=query,
        scopes=SCOPE,
    )


def register_callbacks(app: Dash, query: QueryService) -> None:
    """Read the caller's tenant's incidents of the chosen window from the query room's incident store."""

    @app.callback(
        Output("incidents-list", "children"),
        Output("incidents-detail", "children"),
        Output("incidents-message", "children"),
        url_output("incidents"),
        *window_inputs("incidents", *SCOPE),
        Input("incidents-chosen", "data"),
    )
    def load(
        lookback: str | None, service: str | None, _clicks: int | None, chosen: str | None
    ) -> tuple[Component, Component, str, str]:
        service = (service or "").strip() or None
        url = page_url(lookback, service=service, incident=chosen)
        tenant = read_tenant()
        try:
            start, end, _step_s = chosen_rollup_window(query, lookback, tenant)
            found = query.incidents(
                IncidentQuery(start_ns=start, end_ns=end, service=service, limit=LISTED), tenant=tenant
            )
            picked = [i for i in found if i.incident_id == chosen] or (
                query.incidents(IncidentQuery(incident_id=chosen, limit=1), tenant=tenant) if chosen else []
            )
        except (StorageError, ValueError) as exc:
            return html.Div(), html.Div(), str(exc), url
        prefix = app.get_relative_path("/").rstrip("/")

        def href(incident_id: str) -> str:
            kept = {"lookback": lookback, "service": service, "incident": incident_id}
            return f"{prefix}/incidents?{urlencode({k: v for k, v in kept.items() if v})}"

        def drill(incident: Incident) -> Component:
            operation = incident.name if incident.kind == "operation" else None
            search = search_href(prefix, lookback=lookback, service=incident.service, operation=operation)
            return drilldown(prefix, incident.example_trace_ids, search)

        detail_of = (picked or found)[:1]
        detail = incident_detail(detail_of[0], drill) if detail_of else html.Div()
        return incident_table(found, href, drill), detail, "", url


PAGE = Page(
    module=__name__,
    path="/incidents",
    name="Incidents",
    layout=layout,
    register_callbacks=register_callbacks,
    title="Incidents · Hotspan",
)
