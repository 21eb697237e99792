"""Diagnosis page (``/ui/diagnosis``): the named causes of latency over a window (:mod:`diagnosis`), one card
each with severity, confidence, evidence, remedy and links to example traces."""

from __future__ import annotations

import flask
from dash import Dash, Output, dcc, html
from dash.development.base_component import Component

from dashboards.analysis_figures import finding_cards
from dashboards.controls import window_filter, window_inputs, window_page
from dashboards.pages import Page
from dashboards.tenancy import read_tenant
from diagnosis import Diagnoser, DiagnosisSettings, diagnose_window
from storage.clickhouse import StorageError
from storage.reader import TraceReader

DIAGNOSIS_CONFIG = "HOTSPAN_DIAGNOSIS"
"""Key of the app's Flask config holding the :class:`~diagnosis.DiagnosisSettings` (or None), set by
:func:`dashboards.app.build_dash_app`."""


def layout(**_query: str) -> Component:
    """Window control, a summary line and the finding cards; the callback fills them."""
    return window_page(
        "diagnosis",
        html.P(id="diagnosis-summary", className="hs-hint"),
        dcc.Loading(html.Div(id="diagnosis-findings"), type="dot"),
    )


def register_callbacks(app: Dash, reader: TraceReader) -> None:
    """Diagnose the chosen window of ``reader`` for the caller's tenant with the app's diagnosis settings."""

    @app.callback(
        Output("diagnosis-findings", "children"),
        Output("diagnosis-summary", "children"),
        Output("diagnosis-message", "children"),
        *window_inputs("diagnosis"),
    )
    def load(lookback: str | None, _clicks: int | None) -> tuple[Component, str, str]:
        settings: DiagnosisSettings | None = flask.current_app.config.get(DIAGNOSIS_CONFIG)
        if settings is None:
            return html.Div(), "", "Diagnosis is not configured in this app."
        tenant = read_tenant()
        try:
            where, _step_s = window_filter(reader, lookback, tenant)
            report = diagnose_window(
                reader,
                tenant=tenant,
                start_ns=where.start_ns,
                end_ns=where.end_ns,
                # Built per call: cheap next to reading the window, and it keeps the callback free of state.
                diagnoser=Diagnoser(settings.rules),
                metrics_source=settings.metrics,
            )
        except (StorageError, ValueError) as exc:
            return html.Div(), "", str(exc)
        summary = f"{report.trace_count:,} requests analysed · engine metrics: {report.metrics}"
        if report.errors:
            summary += " · rules failed: " + ", ".join(error.cause for error in report.errors)
        return finding_cards(report.findings, app.get_relative_path("/trace/")), summary, ""


PAGE = Page(
    module=__name__,
    path="/diagnosis",
    name="Diagnosis",
    layout=layout,
    register_callbacks=register_callbacks,
    title="Diagnosis · Hotspan",
)
