"""Figures and tables of the LLM-aware analysis pages (trace stage bar and critical path, Stages, Hotspots,
Diagnosis): pure functions from polars frames or findings to ``go.Figure`` or Dash components, no I/O.

Frames have the columns of :class:`query.analysis_service.AnalysisService`'s answers. Durations arrive in
ns and are shown in ms; shares arrive in [0, 1] and are shown in %. Every stage has one color, the same on
every page (:data:`STAGE_COLORS`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import plotly.graph_objects as go
import polars as pl
from dash import dcc, html
from dash.development.base_component import Component

from analysis import STAGES
from dashboards.colors import NEUTRAL_COLOR, STAGE_COLORS, service_color, stage_label
from dashboards.evidence import evidence_row
from dashboards.figures import TEMPLATE, empty_figure, service_icicle
from dashboards.format import format_duration_ns, shorten
from dashboards.links import drill_header
from diagnosis import EvidenceTest, Finding
from query.store import short_trace_id
from units import NS_PER_MS

SEVERITY_CLASSES = {"critical": "hs-badge hs-badge-critical", "warning": "hs-badge hs-badge-warning"}
"""Badge class per severity; anything else (``info``) gets the plain badge."""
_NUMBER = {"textAlign": "right"}


def stage_shares_figure(shares: pl.DataFrame) -> go.Figure:
    """Stage shares of end-to-end latency over time: stacked bars, one per time bucket (x: bucket start, UTC),
    y: each stage's summed time over the bucket's summed e2e latency, in %.

    Args:
        shares: ``AnalysisService.stage_shares_over_time`` (bucket_start_ns, stage, share_of_e2e).
    """
    if shares.height == 0:
        return empty_figure("No analysed requests in this window")
    frame = shares.with_columns(
        pl.col("share_of_e2e").fill_null(0.0).fill_nan(0.0),
        pl.from_epoch(pl.col("bucket_start_ns"), time_unit="ns").alias("bucket"),
    )
    figure = go.Figure(layout={"template": TEMPLATE})
    for stage in STAGES:
        rows = frame.filter(pl.col("stage") == stage)
        if rows.height == 0 or rows["share_of_e2e"].sum() <= 0:
            continue
        # The stage's name for people, as the Per stage table below and the other pages give it.
        label = stage_label(stage)
        figure.add_trace(
            go.Bar(
                name=label,
                x=rows["bucket"].to_list(),
                y=(rows["share_of_e2e"] * 100).to_list(),
                marker={"color": STAGE_COLORS[stage]},
                customdata=rows["requests"].to_list(),
                hovertemplate=f"<b>{label}</b> %{{y:.1f}}%<br>%{{x}} · %{{customdata}} requests<extra></extra>",
            )
        )
    figure.update_layout(
        barmode="stack",
        height=320,
        margin={"l": 4, "r": 10, "t": 10, "b": 10},
        yaxis={"ticksuffix": "%", "range": [0, 100], "title": "share of e2e latency"},
        legend={"traceorder": "normal"},
    )
    return figure


def stage_percentile_table(percentiles: pl.DataFrame, drill: Callable[[str], Component] | None = None) -> Component:
    """HTML table of ``AnalysisService.stages(...).percentiles`` (one group): per stage with time, requests,
    p50/p95/p99/mean (ms) and share of end-to-end latency (%), in taxonomy order; ``drill`` (stage → a cell of
    links to its traces, :mod:`dashboards.links`) adds a last column."""
    rows = percentiles.filter(pl.col("mean_ns") > 0) if percentiles.height else percentiles
    if rows.height == 0:
        return html.P("No analysed requests in this window.", className="hs-hint")
    header = html.Tr(
        [html.Th("Stage")]
        + [html.Th(name, style=_NUMBER) for name in ("Requests", "p50 (ms)", "p95 (ms)", "p99 (ms)", "Mean (ms)")]
        + [html.Th("Share of e2e", style=_NUMBER)]
        + ([drill_header()] if drill else [])
    )
    body = [
        html.Tr(
            className="hs-stage-row",
            children=[
                html.Td([swatch(STAGE_COLORS.get(row["stage"], NEUTRAL_COLOR)), stage_label(row["stage"])]),
                html.Td(f"{row['requests']:,}", style=_NUMBER),
                *(html.Td(_ms(row[name]), style=_NUMBER) for name in ("p50_ns", "p95_ns", "p99_ns", "mean_ns")),
                html.Td(_percent(row["share_of_e2e"]), style=_NUMBER),
                *([html.Td(drill(row["stage"]))] if drill else []),
            ],
        )
        for row in rows.iter_rows(named=True)
    ]
    return html.Table(className="hs-kv hs-analysis-table", children=[html.Thead(header), html.Tbody(body)])


REPAIRS = {
    "enveloped": "Root missing or never ended: the window is the envelope of the spans",
    "attached": "Orphans or second roots analysed under the root",
    "outliving": "Work that outlived the span that started it, kept whole (the spans above it ending with it)",
    "implausible_root": "Root far longer than everything under it (kept as the window)",
}
"""The repairs of a request's window the Stages page counts (``AnalysisService.stages(...).quality`` columns,
``analysis.request_window``), in words."""


def window_quality_table(quality: pl.DataFrame, examples: Callable[[str], Component] | None = None) -> Component:
    """How many of the window's requests rest on a repaired window (``AnalysisService.stages(...).quality``, one
    group): per repair of :data:`REPAIRS`, its requests and their share of all; ``examples`` (repair → a cell of
    links to such requests, :mod:`dashboards.links`) adds a last column. A line above says how many requests were
    repaired at all, and how many were analysed before data quality was stored (counted in no row)."""
    if quality.height == 0 or quality["requests"][0] == 0:
        return html.P("No analysed requests in this window.", className="hs-hint")
    row = quality.row(0, named=True)
    recorded = row["requests"] - row["unrecorded"]
    header = html.Tr(
        [html.Th("Repair"), html.Th("Requests", style=_NUMBER), html.Th("Share of requests", style=_NUMBER)]
        + ([html.Th("Longest requests", className="hs-drill-col")] if examples else [])
    )
    body = [
        html.Tr(
            className="hs-quality-row",
            id=f"stages-quality-{repair}",
            children=[
                html.Td(label),
                html.Td(f"{row[repair]:,}", style=_NUMBER),
                html.Td(_percent(row[repair] / recorded if recorded else None), style=_NUMBER),
                *([html.Td(examples(repair))] if examples else []),
            ],
        )
        for repair, label in REPAIRS.items()
    ]
    lines = [
        f"{row['reattached']:,} of {recorded:,} requests have spans analysed under another parent than they name; "
        "each trace page says what was repaired and why."
    ]
    if row["unrecorded"]:
        lines.append(f"{row['unrecorded']:,} requests were analysed before data quality was stored: counted in no row.")
    table = html.Table(className="hs-kv hs-analysis-table", children=[html.Thead(header), html.Tbody(body)])
    return html.Div([table, *(html.P(line, className="hs-hint") for line in lines)])


def latency_facts(latency: pl.DataFrame) -> Component:
    """End-to-end latency, TTFT and TPOT (p50/p95/p99) of ``AnalysisService.stages(...).latency`` (one group)
    as fact tiles; a metric no request reports shows "—"."""
    if latency.height == 0:
        return html.P("No analysed requests in this window.", className="hs-hint")
    row = latency.row(0, named=True)
    labels = {"e2e": "End to end", "ttft": "TTFT", "tpot": "TPOT (per token)"}
    facts = [html.Div(className="hs-fact", children=[html.Dt("Requests"), html.Dd(f"{row['requests']:,}")])]
    for metric, label in labels.items():
        values = " / ".join(_ms(row[f"{metric}_{p}_ns"]) for p in ("p50", "p95", "p99"))
        facts.append(
            html.Div(
                className="hs-fact",
                id=f"stages-fact-{metric}",
                children=[html.Dt(f"{label} p50 / p95 / p99 (ms)"), html.Dd(values)],
            )
        )
    return html.Dl(className="hs-facts", children=facts)


def hotspot_table(
    ranking: pl.DataFrame, share_column: str, drill: Callable[[str, str], Component] | None = None
) -> Component:
    """HTML table of an ``AnalysisService.hotspots`` ranking: service, operation, spans, self time total, p95
    and mean (ms), flagged spans, and ``share_column`` (``self_share`` or ``p95_share``, in %); ``drill``
    ((service, operation) → a cell of links to its traces, :mod:`dashboards.links`) adds a last column."""
    if ranking.height == 0:
        return html.P("No analysed spans in this window.", className="hs-hint")
    header = html.Tr(
        [html.Th("Service"), html.Th("Operation")]
        + [
            html.Th(name, style=_NUMBER)
            for name in ("Spans", "Self total (ms)", "Self p95 (ms)", "Self mean (ms)", "Flagged", "Share")
        ]
        + ([drill_header()] if drill else [])
    )
    body = [
        html.Tr(
            className="hs-hotspot-row",
            children=[
                html.Td([swatch(service_color(row["service_name"])), row["service_name"]]),
                html.Td(shorten(row["name"], 80)),
                html.Td(f"{row['spans']:,}", style=_NUMBER),
                *(html.Td(_ms(row[name]), style=_NUMBER) for name in ("self_total_ns", "self_p95_ns", "self_mean_ns")),
                html.Td(
                    f"{row['hotspot_spans']:,}",
                    className="hs-hotspot-cell" if row["hotspot_spans"] else None,
                    style=_NUMBER,
                ),
                html.Td(_percent(row[share_column]), style=_NUMBER),
                *([html.Td(drill(row["service_name"], row["name"]))] if drill else []),
            ],
        )
        for row in ranking.iter_rows(named=True)
    ]
    return html.Table(className="hs-kv hs-analysis-table", children=[html.Thead(header), html.Tbody(body)])


def aggregated_flame_figure(flame: pl.DataFrame) -> go.Figure:
    """The aggregated flame graph as a Plotly icicle: a tile per ``service:operation`` path from the root, width
    = self time of the path's spans plus its descendants' (``total_ns``), colored by service.

    Args:
        flame: ``AnalysisService.flamegraph`` (id, parent, label, service_name, self_ns, total_ns, count); the
            root (parent ``""``) counts the traces.
    """
    if flame.height <= 1 or int(flame["total_ns"].max() or 0) == 0:  # type: ignore[arg-type]
        return empty_figure("No analysed requests in this window")
    is_root = (flame["parent"] == "").to_list()
    notes = [
        f"{count:,} traces" if root else f"self {format_duration_ns(self_ns)} · {count:,} spans"
        for root, self_ns, count in zip(is_root, flame["self_ns"].to_list(), flame["count"].to_list(), strict=True)
    ]
    hover = "<b>%{label}</b><br>%{customdata}<br>%{percentRoot:.1%} of all self time<extra></extra>"
    return service_icicle(flame, notes, hover, 460)


def finding_cards(findings: Sequence[Finding], trace_path: str, search: str | None = None) -> Component:
    """One card per finding, in the given (ranked) order: severity badge, confidence, title, evidence in words
    with units (:mod:`dashboards.evidence`), remedy and links to its example traces and to the window's slowest
    traces (``search``); a "no findings" note when there are none.

    Args:
        findings: ranked findings (``DiagnosisReport.findings``).
        trace_path: URL path a trace ID is appended to, e.g. ``"/ui/trace/"``.
        search: the search of the finding's window, longest first (:func:`dashboards.links.search_href`).
    """
    if not findings:
        return html.Div(
            className="hs-card hs-no-findings",
            children=[
                html.H3("No findings"),
                html.P("No rule found a known cause of latency in this window.", className="hs-hint"),
            ],
        )
    return html.Div(className="hs-findings", children=[_finding_card(f, trace_path, search) for f in findings])


def _finding_card(finding: Finding, trace_path: str, search: str | None) -> Component:
    examples = finding.evidence.get("example_trace_ids") or []
    evidence = [evidence_row(key, value) for key, value in finding.evidence.items() if key != "example_trace_ids"]
    children: list[Component] = [
        html.Div(
            className="hs-finding-head",
            children=[
                html.Span(finding.severity, className=SEVERITY_CLASSES.get(finding.severity, "hs-badge")),
                html.Span(f"confidence {finding.confidence:.0%}", className="hs-hint"),
                html.Code(finding.cause, className="hs-hint"),
            ],
        ),
        html.H3(finding.title),
        html.Table(
            className="hs-kv",
            children=[html.Tbody([html.Tr([html.Td(label), html.Td(value)]) for label, value in evidence])],
        ),
        *([_tests_list(finding.tests)] if finding.tests else []),
        html.P([html.B("Remedy: "), finding.remedy], className="hs-remedy"),
    ]
    if isinstance(examples, list) and examples:
        children.append(
            html.Div(
                className="hs-examples",
                children=["Example traces: "]
                + [
                    dcc.Link(short_trace_id(tid), href=f"{trace_path}{tid}", title=tid, className="hs-mono")
                    for tid in examples
                ]
                + ([dcc.Link("the window's slowest traces →", href=search, className="hs-drill")] if search else []),
            )
        )
    return html.Article(className=f"hs-card hs-finding hs-finding-{finding.severity}", children=children)


TEST_NAMES = {
    "mann_whitney_u": "Mann-Whitney U",
    "poisson_rate": "Poisson rate test",
    "fisher_exact": "Fisher's exact test",
    "binomial": "binomial test",
    "sign_test": "sign test",
}
"""How each test of :mod:`diagnosis.evidence` reads on a finding card."""


def _tests_list(tests: Sequence[EvidenceTest]) -> Component:
    """The comparisons a finding rests on, one line each: the claim, the test with its counts, p-value and
    effect, and either "evidence" or why it is not (:attr:`EvidenceTest.why_not`)."""
    items = []
    for test in tests:
        effect = "—" if test.effect_ratio is None else f"{test.effect_ratio:,.2f}×"
        verdict = "evidence" if test.significant else test.why_not or "not evidence"
        items.append(
            html.Li(
                [
                    html.Span(test.claim),
                    html.Span(
                        f" · {TEST_NAMES[test.name]}, n = {test.counts[0]} / {test.counts[1]}, "
                        f"p = {test.p_value:.2g} (< {test.alpha:.2g} needed), effect {effect} · ",
                        className="hs-hint",
                    ),
                    html.B(verdict, className="hs-test-verdict" if test.significant else "hs-test-verdict-no"),
                ]
            )
        )
    return html.Div(className="hs-tests", children=[html.B("Statistical evidence"), html.Ul(items)])


def swatch(color: str) -> Component:
    """A small square of ``color`` before a service's name (its colour on every page)."""
    return html.Span(className="hs-swatch", style={"background": color})


def _ms(ns: float | int | None) -> str:
    """``ns`` as ms (3 decimals under 1 s, whole ms above); "—" for a missing or NaN value."""
    if ns is None or ns != ns:
        return "—"
    return f"{ns / NS_PER_MS:,.3f}" if ns < 1_000 * NS_PER_MS else f"{ns / NS_PER_MS:,.0f}"


def _percent(share: float | None) -> str:
    """``share`` in [0, 1] as a percentage; "—" for a missing or NaN value."""
    return "—" if share is None or share != share else f"{share:.1%}"
