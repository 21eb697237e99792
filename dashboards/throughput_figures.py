"""The throughput-latency page's builders: the scatter of engine configurations with the Pareto frontier
highlighted, and the table of points with links to example traces. Pure functions of the points frame
(:class:`query.throughput_latency.ThroughputLatency`), no I/O."""

from __future__ import annotations

from collections.abc import Callable

import plotly.graph_objects as go
import polars as pl
from dash import html
from dash.development.base_component import Component

from dashboards.colors import service_color
from dashboards.figures import TEMPLATE, empty_figure
from dashboards.format import format_time_ns, hover_escape
from dashboards.links import drill_header
from query.throughput_latency import CONFIG_KEYS

AXIS_TITLES = {
    "requests_per_s": "Throughput (requests/s)",
    "output_tokens_per_s": "Throughput (output tokens/s)",
    "e2e_p50_ms": "End-to-end latency p50 (ms)",
    "e2e_p95_ms": "End-to-end latency p95 (ms)",
    "ttft_p50_ms": "Time to first token p50 (ms)",
    "ttft_p95_ms": "Time to first token p95 (ms)",
}
"""Axis title of each objective the page offers."""
FRONTIER_COLOR = "#d9480f"
_NUMBER = {"textAlign": "right"}


def throughput_latency_figure(points: pl.DataFrame, throughput: str, latency: str) -> go.Figure:
    """Throughput (x) against latency (y), one marker per point coloured by its configuration (``label``, the
    legend and the hover give it whole) and labelled with what sets it apart (:func:`distinct_labels`); the points
    with ``on_frontier`` ringed and joined by the frontier's staircase, in throughput order.

    Args:
        points: :attr:`query.throughput_latency.ThroughputLatency.points`.
        throughput, latency: the columns drawn (keys of :data:`AXIS_TITLES`).
    """
    drawn = points.filter(pl.col(latency).is_not_null())
    if drawn.height == 0:
        return empty_figure("No vLLM llm_request spans in this window")
    figure = go.Figure(layout={"template": TEMPLATE})
    drawn = drawn.with_columns(distinct_labels(drawn).alias("short_label"))
    for (label,), group in drawn.group_by("label", maintain_order=True):
        hover = [
            f"{hover_escape(str(label))}<br>{format_time_ns(start)}<br>{requests:,} requests<br>"
            f"{rate:,.2f} req/s · {tokens:,.0f} tok/s<br>e2e p50 {p50:,.1f} ms · p95 {p95:,.1f} ms"
            for start, requests, rate, tokens, p50, p95 in group.select(
                "bucket_start_ns", "requests", "requests_per_s", "output_tokens_per_s", "e2e_p50_ms", "e2e_p95_ms"
            ).iter_rows()
        ]
        figure.add_scatter(
            x=group[throughput].to_list(),
            y=group[latency].to_list(),
            mode="markers+text",
            name=str(label),
            text=group["short_label"].to_list(),
            textposition="top center",
            textfont={"size": 10},
            marker={"size": 11, "color": service_color(str(label))},
            hovertext=hover,
            hoverinfo="text",
        )
    frontier = drawn.filter(pl.col("on_frontier")).sort(throughput)
    figure.add_scatter(
        x=frontier[throughput].to_list(),
        y=frontier[latency].to_list(),
        mode="lines+markers",
        name="Pareto frontier",
        # Up, then across: the edge of what the frontier points dominate (higher latency, lower throughput).
        line={"color": FRONTIER_COLOR, "width": 2, "dash": "dot", "shape": "vh"},
        marker={"size": 18, "color": "rgba(0,0,0,0)", "line": {"color": FRONTIER_COLOR, "width": 2.5}},
        hoverinfo="skip",
    )
    figure.update_layout(
        height=460,
        margin={"l": 60, "r": 20, "t": 20, "b": 50},
        xaxis={"title": AXIS_TITLES[throughput], "rangemode": "tozero"},
        yaxis={"title": AXIS_TITLES[latency], "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.2},
    )
    return figure


def distinct_labels(points: pl.DataFrame) -> pl.Series:
    """Per point, the configuration fields that differ between the points (model first, then
    :data:`query.throughput_latency.CONFIG_KEYS`), e.g. ``max_num_seqs=32``: what a marker's label needs when the
    rest is common to all; ``""`` when nothing differs, as the legend already names the one configuration (its whole
    label beside a marker ran past the plot's edge and was cut)."""
    varying = [key for key in CONFIG_KEYS if points[key].n_unique() > 1]
    parts = [pl.when(pl.col(key) != "").then(pl.lit(f"{key}=") + pl.col(key)) for key in varying]
    if points["model"].n_unique() > 1:
        parts.insert(0, pl.col("model"))
    if not parts:
        return pl.Series("label", [""] * points.height, dtype=pl.String)
    return points.select(pl.concat_str(parts, separator=" ", ignore_nulls=True)).to_series()


def throughput_table(points: pl.DataFrame, drill: Callable[[list[str], str], Component]) -> Component:
    """HTML table of the points, frontier first then by throughput: configuration, bucket start (UTC), requests,
    requests/s, output tokens/s, e2e and TTFT p50/p95 (ms), a frontier mark, and ``drill`` (the example trace
    IDs and the model → a cell of links, :func:`dashboards.links.drilldown`)."""
    if points.height == 0:
        return html.P("No vLLM llm_request spans in this window.", className="hs-hint")
    names = ("Requests", "Req/s", "Tok/s", "e2e p50", "e2e p95", "TTFT p50", "TTFT p95")
    header = html.Tr(
        [html.Th("Configuration"), html.Th("Bucket")]
        + [html.Th(name, style=_NUMBER) for name in names]
        + [html.Th("Frontier"), drill_header()]
    )
    ordered = points.sort(["on_frontier", "requests_per_s"], descending=[True, True])
    body = [
        html.Tr(
            className="hs-throughput-row" + (" hs-frontier" if row["on_frontier"] else ""),
            children=[
                html.Td(row["label"]),
                html.Td(format_time_ns(row["bucket_start_ns"])),
                html.Td(f"{row['requests']:,}", style=_NUMBER),
                html.Td(f"{row['requests_per_s']:,.2f}", style=_NUMBER),
                html.Td(f"{row['output_tokens_per_s']:,.0f}", style=_NUMBER),
                *(html.Td(_ms(row[name]), style=_NUMBER) for name in ("e2e_p50_ms", "e2e_p95_ms")),
                *(html.Td(_ms(row[name]), style=_NUMBER) for name in ("ttft_p50_ms", "ttft_p95_ms")),
                html.Td("◆" if row["on_frontier"] else "", className="hs-frontier-mark"),
                html.Td(drill(row["example_trace_ids"], row["model"])),
            ],
        )
        for row in ordered.iter_rows(named=True)
    ]
    return html.Table(className="hs-kv hs-analysis-table", children=[html.Thead(header), html.Tbody(body)])


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f} ms"
