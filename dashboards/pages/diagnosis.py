"""Diagnosis page (``/ui/diagnosis``): the named causes of latency over a window (:mod:`diagnosis`), one card
each with severity, confidence, evidence, remedy and links to example traces; scoped to the traces with a span
of a service and operation when given (kept in the URL)."""

from __future__ import annotations

from dash import Dash, Output, dcc, html
from dash.development.base_component import Component

from dashboards.analysis_figures import finding_cards
from dashboards.controls import page_url, url_output, window_filter, window_inputs, window_page
from dashboards.links import search_href
from dashboards.pages import Page
from dashboards.tenancy import read_tenant
from query.service import QueryService
from query.store import StorageError

SCOPE = ("service", "operation")
"""The scopes the Diagnosis page takes: traces with a span of this service, of this name."""


def layout(**query: str) -> Component:
    """Window control, a summary line and the finding cards; the callback fills them."""
    return window_page(
        "diagnosis",
        html.P(id="diagnosis-summary", className="hs-hint"),
        dcc.Loading(html.Div(id="diagnosis-findings"), type="dot"),
        query=query,
        scopes=SCOPE,
    )


def register_callbacks(app: Dash, query: QueryService) -> None:
    """Diagnose the chosen window for the caller's tenant through the query room (the rules, stage table and
    engine metrics the REST API and the SLO alerts use too)."""

    @app.callback(
        Output("diagnosis-findings", "children"),
        Output("diagnosis-summary", "children"),
        Output("diagnosis-message", "children"),
        url_output("diagnosis"),
        *window_inputs("diagnosis", *SCOPE),
    )
    def load(
        lookback: str | None, service: str | None, operation: str | None, _clicks: int | None
    ) -> tuple[Component, str, str, str]:
        scope = {"service": (service or "").strip() or None, "operation": (operation or "").strip() or None}
        url = page_url(lookback, **scope)
        tenant = read_tenant()
        try:
            where, _step_s = window_filter(query, lookback, tenant)
            report = query.diagnosis.diagnose(tenant=tenant, start_ns=where.start_ns, end_ns=where.end_ns, **scope)
        except (StorageError, ValueError) as exc:
            return html.Div(), "", str(exc), url
        summary = f"{report.trace_count:,} requests analysed · engine metrics: {report.metrics}"
        if report.errors:
            summary += " · rules failed: " + ", ".join(error.cause for error in report.errors)
        prefix = app.get_relative_path("/").rstrip("/")
        search = search_href(prefix, lookback=lookback, **scope)
        return finding_cards(report.findings, app.get_relative_path("/trace/"), search), summary, "", url


PAGE = Page(
    module=__name__,
    path="/diagnosis",
    name="Diagnosis",
    layout=layout,
    register_callbacks=register_callbacks,
    title="Diagnosis · Hotspan",
)
