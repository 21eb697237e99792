"""Plotly basics every page shares (the template, the "nothing to draw" figure) and the search page's scatter:
pure functions from polars frames to ``go.Figure``, no I/O. The trace page's figures are in
:mod:`dashboards.trace_panels`."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from dashboards.colors import ERROR_COLOR, NEUTRAL_COLOR, SERVICE_PALETTE, service_color
from dashboards.format import format_duration_ns, format_time_ns, hover_escape, shorten
from units import NS_PER_MS

FONT = "Inter, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"

GRID_COLOR = "#eef0f3"
TEMPLATE = {
    "layout": {
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "colorway": SERVICE_PALETTE,
        "font": {"family": FONT, "size": 12, "color": "#1f2328"},
        "hoverlabel": {"align": "left", "font": {"family": FONT, "size": 12}},
        "xaxis": {"gridcolor": GRID_COLOR, "linecolor": GRID_COLOR, "zerolinecolor": GRID_COLOR, "automargin": True},
        "yaxis": {"gridcolor": GRID_COLOR, "linecolor": GRID_COLOR, "zerolinecolor": GRID_COLOR, "automargin": True},
    }
}
"""A light template of our own: Plotly deep-copies a named one such as ``plotly_white`` into every
figure, which costs more than building a small trace's whole figure."""


def empty_figure(message: str) -> go.Figure:
    """A figure that says why there is nothing to draw, instead of a blank canvas."""
    figure = go.Figure(layout={"template": TEMPLATE})
    figure.add_annotation(
        text=hover_escape(message), showarrow=False, font={"size": 15, "color": "#6b7280"}, x=0.5, y=0.5
    )
    figure.update_layout(
        height=220,
        xaxis={"visible": False},
        yaxis={"visible": False},
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
    )
    return figure


def service_icicle(flame: pl.DataFrame, customdata: object, hovertemplate: str, height: int) -> go.Figure:
    """A flame graph (``processors.pipeline.flame.flame_graph`` columns: id, parent, label, service_name,
    total_ns...) as a Plotly icicle: width = ``total_ns``, a tile coloured by its service (the root neutral), up to
    12 levels at once (a click zooms deeper).

    Args:
        flame: the flame graph, root first.
        customdata: per tile, what ``hovertemplate`` reads.
        hovertemplate: Plotly's hover template.
        height: figure height in px.
    """
    colors = [
        NEUTRAL_COLOR if parent == "" else service_color(service or "")
        for parent, service in zip(flame["parent"].to_list(), flame["service_name"].to_list(), strict=True)
    ]
    figure = go.Figure(
        layout={"template": TEMPLATE},
        data=go.Icicle(
            ids=flame["id"].to_list(),
            parents=flame["parent"].to_list(),
            labels=[hover_escape(shorten(label or "", 80)) for label in flame["label"].to_list()],
            values=flame["total_ns"].cast(pl.Int64).to_list(),
            branchvalues="total",
            sort=False,
            tiling={"orientation": "v"},
            marker={"colors": colors, "line": {"color": "#ffffff", "width": 1}},
            customdata=customdata,
            texttemplate="%{label}",
            hovertemplate=hovertemplate,
            pathbar={"visible": True, "thickness": 20},
            leaf={"opacity": 1},
            maxdepth=12,
        ),
    )
    figure.update_layout(height=height, margin={"l": 4, "r": 4, "t": 30, "b": 4})
    return figure


def search_scatter_figure(summaries: pl.DataFrame) -> go.Figure:
    """Jaeger's result scatter: one dot per trace at (start time UTC, duration in ms), dot area growing
    with span count, red when the trace has errors. ``customdata`` is ``[trace_id]``.

    Args:
        summaries: rows of :meth:`storage.reader.TraceReader.search` (``trace_id``, ``root_service``,
            ``root_name``, ``start_time_unix_nano`` ns, ``duration_ns``, ``span_count``, ``error_count``).
    """
    if summaries.height == 0:
        return empty_figure("No traces match these filters")
    rows = summaries.to_dicts()
    span_counts = [int(row["span_count"]) for row in rows]
    largest = max(span_counts)
    figure = go.Figure(
        layout={"template": TEMPLATE},
        data=go.Scatter(
            x=summaries["start_time_unix_nano"].cast(pl.Datetime("ns", "UTC")).to_list(),
            y=[int(row["duration_ns"]) / NS_PER_MS for row in rows],
            mode="markers",
            marker={
                "size": [8 + 18 * (count / largest) ** 0.5 for count in span_counts],
                "color": [ERROR_COLOR if row["error_count"] else SERVICE_PALETTE[0] for row in rows],
                "opacity": 0.75,
                "line": {"color": "#ffffff", "width": 1},
            },
            customdata=[[row["trace_id"]] for row in rows],
            hovertext=[_search_hover(row) for row in rows],
            hovertemplate="%{hovertext}<extra></extra>",
        ),
    )
    figure.update_layout(
        height=220,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        yaxis={
            "title": {"text": "duration"},
            "ticksuffix": " ms",
            "exponentformat": "none",
            "separatethousands": True,
            "rangemode": "tozero",
        },
    )
    return figure


def _search_hover(summary: dict[str, object]) -> str:
    """Hover text of one search result dot."""
    root = f"{summary['root_service']}: {shorten(str(summary['root_name']), 60)}"
    return (
        f"<b>{hover_escape(root)}</b><br>"
        f"{format_duration_ns(int(summary['duration_ns']))} · {summary['span_count']} spans"
        f" · {summary['error_count']} errors<br>{format_time_ns(int(summary['start_time_unix_nano']))}"
        f"<br>{summary['trace_id']}"
    )
