"""Figures of the Services page: pure functions from polars frames to ``go.Figure`` or SVG text, no I/O.

- :func:`red_table`: the RED table, one HTML row per group, with :func:`sparkline_data_uri` sparklines: tiny
  inline SVG lines (``<img>`` sources), so a table of a hundred operations stays one HTML table instead of a
  hundred graphs.
- :func:`red_latency_figure`: p95 latency per group over time, from the RED series
  (:class:`storage.rollup_reader.RedResult`).
- :func:`tier_table`: latency and drops per admission tier (P0, P1 ...) of each entry service
  (``query.diagnosis.DiagnosisService.tiers``).
- :func:`engine_metrics_figure`: vLLM's queue, KV-cache usage, prefix-cache hit rate and TTFT over the same
  window (:mod:`storage.engine_metrics`), on the same time axis so the two can be read one above the other.

Times arrive as Int64 ns since the epoch and are drawn as UTC datetimes.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from datetime import timedelta

import plotly.graph_objects as go
import polars as pl
from dash import html
from dash.development.base_component import Component
from plotly.subplots import make_subplots

from dashboards.colors import ERROR_COLOR, SERVICE_PALETTE, service_color
from dashboards.figures import TEMPLATE, empty_figure
from dashboards.format import format_rate, format_share
from dashboards.links import drill_header

MAX_LINES = 8
"""Groups drawn in the latency figure (the busiest ones); the table lists all."""

ENGINE_PANELS: tuple[tuple[str, tuple[tuple[str, str], ...], float], ...] = (
    ("Requests waiting (peak per step)", (("waiting", "waiting"),), 1.0),
    ("KV-cache usage (%, peak per step)", (("kv_cache_usage", "usage"),), 100.0),
    ("Prefix-cache hit rate (%)", (("prefix_cache_hit", "hit rate"),), 100.0),
    ("TTFT (ms)", (("ttft_p50_s", "TTFT p50"), ("ttft_p95_s", "TTFT p95")), 1000.0),
)
"""Engine panels: title, ``(series, legend name)`` pairs, and the factor from the series' unit to the shown one."""


SPARKLINE_STYLE = {"width": "100%", "height": "26px", "display": "block"}
"""Style of a sparkline ``<img>``: as wide as its table cell (the SVG stretches), so it never leaves the card."""


def sparkline_data_uri(
    values: Sequence[float | None], color: str = SERVICE_PALETTE[0], width: int = 120, height: int = 26
) -> str:
    """A ``data:image/svg+xml`` URI drawing ``values`` as a polyline (None values are gaps drawn at 0), scaled
    to the box; a flat line for fewer than two points or a constant series. The drawing stretches to whatever
    box the image is given (``preserveAspectRatio="none"``) with a constant stroke width."""
    points = [0.0 if v is None else float(v) for v in values]
    if len(points) < 2:
        points = [points[0] if points else 0.0] * 2
    low, high = min(points), max(points)
    span = (high - low) or 1.0
    step = (width - 2) / (len(points) - 1)
    coordinates = " ".join(
        f"{1 + i * step:.1f},{height - 2 - (value - low) / span * (height - 4):.1f}" for i, value in enumerate(points)
    )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
        ' preserveAspectRatio="none">'
        f'<polyline fill="none" stroke="{color}" stroke-width="1.5" vector-effect="non-scaling-stroke"'
        f' points="{coordinates}"/></svg>'
    )
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


OVERFLOW_LABEL = "other (beyond HOTSPAN_CARDINALITY_LIMIT)"
"""Name of the RED row that folds the groups beyond the read's limit."""


def group_label(row: dict) -> str:
    """``service`` or ``service · operation (kind)`` for a RED row; :data:`OVERFLOW_LABEL` for the overflow row."""
    if row.get("overflow"):
        return OVERFLOW_LABEL
    if row.get("operation") is None:
        return str(row["service"])
    return f"{row['service']} · {row['operation']} ({row['span_kind']})"


def red_latency_figure(
    totals: pl.DataFrame, series: pl.DataFrame, x_range_ns: tuple[int, int], step_s: int = 60
) -> go.Figure:
    """p95 latency (ms) per group and step for the :data:`MAX_LINES` groups with the most calls.

    Each step is drawn at the middle of its bucket, with a marker large enough to read alone and not clipped at
    the plot's edge, so a short run (one bucket per group) shows centred points rather than slivers at the left
    edge.

    Args:
        totals: RED totals (group keys, ``calls``); decides which groups are drawn.
        series: RED series (group keys, ``bucket_start_ns``, ``p95_ns``).
        x_range_ns: the window, so this figure and :func:`engine_metrics_figure` share a time axis.
        step_s: the series' bucket width in seconds.
    """
    if series.height == 0:
        return empty_figure("No spans in this window")
    keys = _group_keys(totals)
    busiest = totals.sort("calls", descending=True).head(MAX_LINES).select(keys)
    step_ns = step_s * 1_000_000_000
    step = timedelta(seconds=step_s)
    figure = go.Figure(layout={"template": TEMPLATE})
    for index, group in enumerate(busiest.iter_rows(named=True)):
        points = series.filter(pl.all_horizontal(pl.col(k) == v for k, v in group.items())).sort("bucket_start_ns")
        starts = pl.from_epoch(points["bucket_start_ns"], time_unit="ns")
        buckets = (starts.dt.strftime("%H:%M") + "–" + (starts + step).dt.strftime("%H:%M")).to_list()
        figure.add_trace(
            go.Scatter(
                x=pl.from_epoch(points["bucket_start_ns"] + step_ns // 2, time_unit="ns").to_list(),
                y=(points["p95_ns"] / 1e6).to_list(),
                mode="lines+markers",
                name=group_label(group),
                # A service keeps its colour from the trace page; other groupings take the palette in turn.
                line={"color": _line_color(group, index), "width": 2},
                marker={"size": 6 if points.height > 1 else 9},
                cliponaxis=False,
                customdata=buckets,
                hovertemplate="%{customdata} UTC  p95 %{y:.1f} ms<extra>%{fullData.name}</extra>",
            )
        )
    figure.update_layout(
        height=280,
        margin={"l": 60, "r": 20, "t": 10, "b": 40},
        yaxis={"title": {"text": "p95 (ms)"}, "rangemode": "tozero"},
        xaxis={"range": _datetime_range(x_range_ns)},
        legend={"orientation": "h", "y": -0.25},
    )
    return figure


def _line_color(group: dict[str, object], index: int) -> str:
    return (
        service_color(str(group["service"]))
        if set(group) - {"overflow"} == {"service"} and not group.get("overflow")
        else SERVICE_PALETTE[index % len(SERVICE_PALETTE)]
    )


def engine_metrics_figure(engine: pl.DataFrame, x_range_ns: tuple[int, int]) -> go.Figure:
    """vLLM's engine series in four stacked panels (see :data:`ENGINE_PANELS`) over the window.

    Args:
        engine: ``series``, ``time_ns``, ``value`` (:meth:`storage.engine_metrics.EngineMetricsReader.engine_series`).
        x_range_ns: the window shown above it.
    """
    if engine.height == 0:
        return empty_figure("Prometheus has no vLLM samples in this window")
    figure = make_subplots(
        rows=len(ENGINE_PANELS),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        subplot_titles=[title for title, _, _ in ENGINE_PANELS],
    )
    for row, (_, members, factor) in enumerate(ENGINE_PANELS, start=1):
        for index, (name, legend) in enumerate(members):
            points = engine.filter(pl.col("series") == name).sort("time_ns")
            figure.add_trace(
                go.Scatter(
                    x=pl.from_epoch(points["time_ns"], time_unit="ns").to_list(),
                    y=(points["value"] * factor).to_list(),
                    mode="lines",
                    name=legend,
                    line={"color": SERVICE_PALETTE[(row + index) % len(SERVICE_PALETTE)], "width": 1.8},
                    showlegend=len(members) > 1,
                    hovertemplate="%{x|%H:%M:%S} UTC  %{y:.3g}<extra>" + legend + "</extra>",
                ),
                row=row,
                col=1,
            )
    figure.update_layout(
        template=TEMPLATE, height=120 * len(ENGINE_PANELS) + 60, margin={"l": 60, "r": 20, "t": 30, "b": 30}
    )
    figure.update_xaxes(range=_datetime_range(x_range_ns))
    figure.update_yaxes(rangemode="tozero")
    return figure


def _datetime_range(x_range_ns: tuple[int, int]) -> list:
    return pl.from_epoch(pl.Series(list(x_range_ns), dtype=pl.Int64), time_unit="ns").to_list()


_NAME_COLUMN = {"width": "36%", "overflowWrap": "anywhere"}
_NUMBER = {"textAlign": "right", "whiteSpace": "nowrap"}


def red_table(
    totals: pl.DataFrame,
    series: pl.DataFrame,
    window_s: float,
    drill: Callable[[dict[str, object]], Component] | None = None,
) -> Component:
    """An HTML table, one row per group, busiest first: rate, error rate, p50/p95/p99 and two sparklines.

    Args:
        totals, series: a :class:`~storage.rollup_reader.RedResult`'s frames.
        window_s: length of the selected window in seconds; the rate is calls over it (at least 1 s), as
            Grafana's ``$__range`` rates and SigNoz's service table read, and its header says so.
        drill: a group's row (``service``, ``operation``...) → a cell of links to its traces
            (:mod:`dashboards.links`); adds a last column.
    """
    if totals.height == 0:
        return html.P("No spans in this window.", className="hs-hint")
    keys = _group_keys(totals)
    window_s = max(window_s, 1.0)
    rate_note = f"Calls per second, minute, hour or day, averaged over the selected window ({_window_text(window_s)})"
    header = html.Tr(
        [html.Th("Operation" if "operation" in keys else "Service", style=_NAME_COLUMN)]
        + [html.Th("Calls", style=_NUMBER), html.Th("Rate (window avg)", title=rate_note, style=_NUMBER)]
        + [html.Th(name, style=_NUMBER) for name in ("Errors", "p50 (ms)", "p95 (ms)", "p99 (ms)")]
        + [html.Th(name) for name in ("Calls over time", "p95 over time")]
        + ([drill_header()] if drill else [])
    )
    rows = []
    # One pass over the series (a filter per row was quadratic: minutes for thousands of operations).
    by_group = series.sort("bucket_start_ns").partition_by(keys, as_dict=True)
    empty = series.clear()
    for row in totals.sort("calls", descending=True).iter_rows(named=True):
        points = by_group.get(tuple(row[k] for k in keys), empty)
        error_rate = row["errors"] / row["calls"] if row["calls"] else 0.0
        rows.append(
            html.Tr(
                className="hs-red-row",
                children=[
                    html.Td(group_label(row), className="hs-mono", style=_NAME_COLUMN),
                    html.Td(f"{row['calls']:,}", style=_NUMBER),
                    html.Td(format_rate(row["calls"] / window_s), title=rate_note, style=_NUMBER),
                    html.Td(f"{error_rate:.1%}", className="hs-error-cell" if row["errors"] else None, style=_NUMBER),
                    *(html.Td(_ms(row[name]), style=_NUMBER) for name in ("p50_ns", "p95_ns", "p99_ns")),
                    html.Td(
                        html.Img(src=sparkline_data_uri(points["calls"].to_list()), alt="calls", style=SPARKLINE_STYLE)
                    ),
                    html.Td(
                        html.Img(
                            src=sparkline_data_uri(
                                points["p95_ns"].to_list(), color=ERROR_COLOR if row["errors"] else SERVICE_PALETTE[1]
                            ),
                            alt="p95",
                            style=SPARKLINE_STYLE,
                        )
                    ),
                    *([html.Td(drill(row))] if drill else []),
                ],
            )
        )
    return html.Table(className="hs-kv hs-red-table", children=[html.Thead(header), html.Tbody(rows)])


def _group_keys(totals: pl.DataFrame) -> list[str]:
    """The columns naming a RED group in ``totals``: the overflow flag (when read) and the group keys."""
    return [k for k in ("overflow", "service", "operation", "span_kind") if k in totals.columns]


def _window_text(seconds: float) -> str:
    """``"45 s"``, ``"1 min"``, ``"6 h"``, ``"7 d"``: a window length as its lookback would be named."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def _ms(ns: float | None) -> str:
    return "–" if ns is None else f"{ns / 1e6:.1f}"


def tier_table(tiers: pl.DataFrame) -> Component:
    """An HTML table of ``DiagnosisService.tiers(...)``: per entry service and tier (most urgent first), requests,
    dropped (count and share) and p50/p95 latency in ms; a hint when no request carries a tier."""
    if tiers.height == 0:
        return html.P(
            "No request in this window carries an admission tier (hotspan.tier, gateway.priority_tier, priority ...).",
            className="hs-hint",
        )
    header = html.Tr(
        [html.Th("Service"), html.Th("Tier")]
        + [html.Th(name, style=_NUMBER) for name in ("Requests", "Dropped", "Dropped %", "p50 (ms)", "p95 (ms)")]
    )
    body = [
        html.Tr(
            [
                html.Td(row["service_name"]),
                html.Td(row["tier"]),
                html.Td(f"{row['request_count']:,}", style=_NUMBER),
                html.Td(f"{row['dropped_count']:,}", style=_NUMBER),
                html.Td(format_share(row["dropped_share"]), style=_NUMBER),
                html.Td(f"{row['latency_ms_p50']:,.1f}", style=_NUMBER),
                html.Td(f"{row['latency_ms_p95']:,.1f}", style=_NUMBER),
            ]
        )
        for row in tiers.iter_rows(named=True)
    ]
    return html.Table(className="hs-kv hs-tier-table", children=[html.Thead(header), html.Tbody(body)])
