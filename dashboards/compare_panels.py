"""The comparison page's panels: two traces side by side (:class:`query.trace_compare.TraceComparison`) and a
window's slow requests against its baseline (:class:`query.window_compare.WindowComparison`). Pure builders,
tested without a browser; durations with their units, shares in %, a change in red when it is slower."""

from __future__ import annotations

from dash import dcc, html
from dash.development.base_component import Component

from dashboards.colors import STAGE_COLORS, service_color, stage_label
from dashboards.format import format_duration_ns, format_share, shorten
from query.trace_compare import TraceComparison
from query.trace_model import TraceView
from query.window_compare import ATTRIBUTES, WindowComparison

PATH_ROWS = 100
"""Paths listed, largest change first."""
ATTRIBUTE_ROWS = 30
"""Attribute values listed, largest difference first."""
_NUMBER = {"textAlign": "right"}


def trace_comparison_panel(comparison: TraceComparison, prefix: str) -> Component:
    """Both traces' facts side by side, the stage deltas, then the paths that changed most (each path's spans in
    A and B, summed durations, the change; a path only one trace has is marked)."""
    sides = html.Div(
        className="hs-compare-sides",
        children=[_side("A", comparison.a, prefix), _side("B", comparison.b, prefix)],
    )
    stage_rows = [
        html.Tr(
            className="hs-compare-stage",
            children=[
                html.Td([_swatch(STAGE_COLORS.get(row["stage"], "#c8ccd4")), stage_label(row["stage"])]),
                html.Td(format_duration_ns(row["a_ns"]), style=_NUMBER),
                html.Td(format_duration_ns(row["b_ns"]), style=_NUMBER),
                _delta_cell(row["delta_ns"]),
            ],
        )
        for row in comparison.stages.sort("delta_ns", descending=True).iter_rows(named=True)
    ]
    path_rows = [
        html.Tr(
            className="hs-compare-path",
            title=row["label"],
            children=[
                html.Td(
                    [
                        html.Span(style={"display": "inline-block", "width": f"{min(row['depth'], 20) * 12}px"}),
                        _swatch(service_color(row["label"].split(":", 1)[0])),
                        shorten(row["label"], 80),
                        _presence(row["count_a"], row["count_b"]),
                    ]
                ),
                html.Td(f"{row['count_a']:,}", style=_NUMBER),
                html.Td(f"{row['count_b']:,}", style=_NUMBER),
                html.Td(format_duration_ns(row["duration_a_ns"]), style=_NUMBER),
                html.Td(format_duration_ns(row["duration_b_ns"]), style=_NUMBER),
                _delta_cell(row["delta_ns"]),
            ],
        )
        for row in comparison.paths.head(PATH_ROWS).iter_rows(named=True)
    ]
    structure = (
        f"{comparison.paths.height:,} paths: {comparison.only_a:,} only in A, {comparison.only_b:,} only in B; "
        f"the {min(PATH_ROWS, comparison.paths.height):,} that changed most:"
    )
    return html.Div(
        [
            sides,
            html.H3("Stages", className="hs-compare-heading"),
            _table(("Stage", "A", "B", "B − A"), stage_rows),
            html.H3("Spans by path (service:operation from the root)", className="hs-compare-heading"),
            html.P(structure, className="hs-hint", id="compare-structure"),
            _table(("Path", "Spans A", "Spans B", "Time A", "Time B", "B − A"), path_rows),
        ]
    )


def window_comparison_panel(comparison: WindowComparison | None, quantile: float) -> Component:
    """The slow requests' stages and attribute values against the baseline's, or why there is nothing to
    compare."""
    if comparison is None:
        return html.P("Too few analysed requests in this window to compare.", className="hs-hint")
    summary = (
        f"{comparison.slow:,} requests at or above the p{quantile * 100:g} duration "
        f"({format_duration_ns(comparison.threshold_ns)}) against the other {comparison.baseline:,}."
    )
    stage_rows = [
        html.Tr(
            className="hs-window-stage",
            children=[
                html.Td([_swatch(STAGE_COLORS.get(row["stage"], "#c8ccd4")), stage_label(row["stage"])]),
                html.Td(format_duration_ns(row["slow_mean_ns"]), style=_NUMBER),
                html.Td(format_duration_ns(row["baseline_mean_ns"]), style=_NUMBER),
                _delta_cell(row["delta_ns"]),
            ],
        )
        for row in comparison.stages.iter_rows(named=True)
    ]
    attribute_rows = [
        html.Tr(
            className="hs-window-attribute",
            children=[
                html.Td(ATTRIBUTES.get(row["attribute"], row["attribute"])),
                html.Td(shorten(row["value"], 60)),
                html.Td(format_share(row["slow_share"]), style=_NUMBER),
                html.Td(format_share(row["baseline_share"]), style=_NUMBER),
                html.Td(
                    f"{row['delta'] * 100:+.1f} points",
                    className="hs-worse" if row["delta"] > 0 else "hs-better" if row["delta"] < 0 else None,
                    style=_NUMBER,
                ),
            ],
        )
        for row in comparison.attributes.head(ATTRIBUTE_ROWS).iter_rows(named=True)
    ]
    return html.Div(
        [
            html.P(summary, id="compare-window-summary"),
            html.H3("Stages, mean per request", className="hs-compare-heading"),
            _table(("Stage", "Slow", "Baseline", "Slow − baseline"), stage_rows),
            html.H3("Attribute values", className="hs-compare-heading"),
            _table(("Attribute", "Value", "Among slow", "In baseline", "Difference"), attribute_rows, text_columns=2),
        ]
    )


def _side(name: str, view: TraceView, prefix: str) -> Component:
    root = view.primary_root
    return html.Div(
        className="hs-card hs-compare-side",
        children=[
            html.Div(f"Trace {name}", className="hs-hint"),
            html.H3(f"{view.spans['service_name'][root]}: {shorten(str(view.spans['name'][root]), 60)}"),
            dcc.Link(view.trace_id, href=f"{prefix}/trace/{view.trace_id}", className="hs-mono"),
            html.Dl(
                className="hs-facts",
                children=[
                    html.Div(className="hs-fact", children=[html.Dt(label), html.Dd(value)])
                    for label, value in (
                        ("Duration", format_duration_ns(view.duration_ns)),
                        ("Spans", f"{view.size:,}"),
                        ("Errors", f"{int(view.error.sum()):,}"),
                        ("Dominant stage", stage_label(view.lane.dominant) if view.lane.dominant else "—"),
                    )
                ],
            ),
        ],
    )


def _delta_cell(delta_ns: float) -> Component:
    if delta_ns == 0:
        return html.Td("0", style=_NUMBER)
    sign = "+" if delta_ns > 0 else "−"
    return html.Td(
        f"{sign}{format_duration_ns(abs(delta_ns))}",
        className="hs-worse" if delta_ns > 0 else "hs-better",
        style=_NUMBER,
    )


def _presence(count_a: int, count_b: int) -> Component | str:
    if count_a and count_b:
        return ""
    return html.Span(" only in B" if not count_a else " only in A", className="hs-badge")


def _swatch(color: str) -> Component:
    return html.Span(className="hs-swatch", style={"background": color})


def _table(columns: tuple[str, ...], rows: list[Component], text_columns: int = 1) -> Component:
    """A table whose first ``text_columns`` columns are text and the others numbers (right-aligned)."""
    if not rows:
        return html.P("Nothing differs.", className="hs-hint")
    header = html.Tr(
        [html.Th(name, style=_NUMBER if index >= text_columns else None) for index, name in enumerate(columns)]
    )
    return html.Table(className="hs-kv hs-analysis-table", children=[html.Thead(header), html.Tbody(rows)])
