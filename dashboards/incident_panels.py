"""Builders of the Incidents page: the list of incidents and one incident's detail (its deviating series against
their baselines, the diagnosis of its window with new causes marked, neighbours and example traces). Pure:
incidents (:class:`storage.incident_store.Incident`) in, Dash components out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dash import dcc, html
from dash.development.base_component import Component

from dashboards.analysis_figures import SEVERITY_CLASSES, swatch
from dashboards.colors import service_color
from dashboards.format import format_time_ns
from query.incident_text import incident_summary, metric_value
from query.store import Incident

_NUMBER = {"textAlign": "right"}
STATUS_CLASSES = {"open": "hs-badge hs-badge-critical", "resolved": "hs-badge"}
NO_INCIDENT = (
    "No incident in this window: every judged series stayed within its baseline, and no diagnosis finding was new. A"
    " minute is judged once it holds 20 calls (HOTSPAN_ANOMALY_MIN_CALLS): its series against at least 5 earlier"
    " minutes with 5 calls each, its diagnosis against that of the 30 minutes before; make demo runs a minute with a"
    " fault (queue_saturation) after its first run, which opens one about two and a half minutes in."
)
"""What an empty incident list says: why, and how to see one (``hotspan.demo``)."""


def incident_table(
    incidents: Sequence[Incident], href: Callable[[str], str], drill: Callable[[Incident], Component]
) -> Component:
    """One row per incident, newest first: status, opened (UTC), the primary series, its metric observed against
    the baseline, robust score, services that deviated, the top new cause, example traces (``drill``); the series
    cell links to the incident's detail (``href(incident_id)``)."""
    if not incidents:
        return html.P(NO_INCIDENT, className="hs-hint")
    header = html.Tr(
        [html.Th(name) for name in ("Status", "Opened (UTC)", "Series", "Metric")]
        + [html.Th(name, style=_NUMBER) for name in ("Observed", "Baseline", "Score")]
        + [html.Th(name) for name in ("Services", "New cause", "Example traces")]
    )
    body = [
        html.Tr(
            className=f"hs-incident-row hs-incident-{incident.status}",
            children=[
                html.Td(html.Span(incident.status, className=STATUS_CLASSES[incident.status])),
                html.Td(format_time_ns(incident.window_start_ns, zone=False)),
                html.Td(
                    dcc.Link(
                        [swatch(service_color(incident.service)), f"{incident.service} · {incident.name}"],
                        href=href(incident.incident_id),
                        className="hs-incident-link",
                    )
                ),
                html.Td(incident.metric),
                html.Td(metric_value(incident.metric, incident.observed_value), style=_NUMBER),
                html.Td(metric_value(incident.metric, incident.baseline_value), style=_NUMBER),
                html.Td(f"{incident.score:.3g}", style=_NUMBER),
                html.Td(", ".join(incident.services)),
                html.Td(_top_cause(incident.findings)),
                html.Td(drill(incident)),
            ],
        )
        for incident in incidents
    ]
    return html.Table(className="hs-kv hs-analysis-table hs-incidents", children=[html.Thead(header), html.Tbody(body)])


def incident_detail(incident: Incident, drill: Callable[[Incident], Component]) -> Component:
    """One incident: its summary, window and baseline window, every deviating series against its baseline, the
    diagnosis findings of the window (new ones marked), neighbours and example traces (``drill``)."""
    baseline = "same time one day earlier" if incident.seasonal else "trailing minutes"
    window = (
        f"window {format_time_ns(incident.window_start_ns)} – {format_time_ns(incident.window_end_ns)} · "
        f"baseline ({baseline}) {format_time_ns(incident.baseline_start_ns)} – "
        f"{format_time_ns(incident.baseline_end_ns)}"
    )
    if incident.resolved_at_ns is not None:
        window += f" · resolved {format_time_ns(incident.resolved_at_ns)}"
    series = html.Table(
        className="hs-kv hs-analysis-table hs-incident-series",
        children=[
            html.Thead(
                html.Tr(
                    [html.Th(n) for n in ("Kind", "Service", "Operation, stage or cause", "Metric")]
                    + [html.Th(n, style=_NUMBER) for n in ("Observed", "Baseline", "Score", "Calls")]
                )
            ),
            html.Tbody(
                [
                    html.Tr(
                        [
                            html.Td(s["kind"]),
                            html.Td([swatch(service_color(s["service"])), s["service"]]),
                            html.Td(s["name"]),
                            html.Td(s["metric"]),
                            html.Td(metric_value(s["metric"], s["observed"]), style=_NUMBER),
                            html.Td(metric_value(s["metric"], s["baseline"]), style=_NUMBER),
                            html.Td(f"{s['score']:.3g}", style=_NUMBER),
                            html.Td(f"{s['calls']:,}", style=_NUMBER),
                        ]
                    )
                    for s in incident.series
                ]
            ),
        ],
    )
    return html.Div(
        className="hs-card hs-incident-detail",
        children=[
            html.H3(incident_summary(incident)),
            html.P(window, className="hs-hint"),
            series,
            html.H4("Diagnosis of the window against the baseline"),
            _findings(incident.findings),
            html.P(["Neighbours: ", ", ".join(incident.neighbours) or "none in the service graph"]),
            html.Div(["Example traces: ", drill(incident)], className="hs-examples"),
        ],
    )


def _findings(findings: Sequence[dict[str, Any]]) -> Component:
    if not findings:
        return html.P("No rule named a cause in this window.", className="hs-hint")
    return html.Div(
        className="hs-findings",
        children=[
            html.Article(
                className=f"hs-card hs-finding hs-finding-{f['severity']}",
                children=[
                    html.Div(
                        className="hs-finding-head",
                        children=[
                            html.Span(f["severity"], className=SEVERITY_CLASSES.get(f["severity"], "hs-badge")),
                            html.Span("new" if f["new"] else "also in the baseline", className="hs-hint"),
                            html.Code(f["cause"], className="hs-hint"),
                        ],
                    ),
                    html.H3(f["title"]),
                    *_before(f),
                    html.P([html.B("Remedy: "), f["remedy"]], className="hs-remedy"),
                ],
            )
            for f in findings
        ],
    )


def _before(finding: dict[str, Any]) -> list[Component]:
    """The baseline window's finding of the same cause, when it had one and said something else."""
    before = finding.get("baseline_title")
    if not before or before == finding["title"]:
        return []
    return [html.P(["In the baseline: ", before], className="hs-hint hs-finding-before")]


def _top_cause(findings: Sequence[dict[str, Any]]) -> str | Component:
    new = [f for f in findings if f["new"]]
    if not new:
        return "—"
    cause = new[0]["cause"]
    return html.Span([*_breakable(cause), f" ({new[0]['severity']})"], title=cause)


def _breakable(name: str) -> list[str | Component]:
    """``name`` with a line break allowed after each ``_`` (``<wbr>``, which copies as nothing): a narrow column
    wraps ``queue_saturation`` as ``queue_`` / ``saturation``, not ``queue_saturati`` / ``on``."""
    parts: list[str | Component] = []
    for piece in name.split("_")[:-1]:
        parts += [f"{piece}_", html.Wbr()]
    return [*parts, name.split("_")[-1]]
