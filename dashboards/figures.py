"""Plotly figures of traces: pure functions from polars frames to ``go.Figure``, no I/O.

Span frames have the columns of :meth:`storage.reader.TraceReader.trace`; the builders need
``span_id``, ``parent_span_id``, ``name``, ``service_name``, ``start_time_unix_nano`` (int ns since
the epoch) and ``duration_ns`` (int ns), and use ``kind``, ``status_code``, ``status_message`` and
``attributes`` when present. Times are kept as integer ns until the last step, because epoch
nanoseconds (~1.7e18) lose precision in a float; the figures show ms relative to the trace start.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import polars as pl

from dashboards.format import (
    NS_PER_MS,
    attribute_dict,
    format_duration_ns,
    format_time_ns,
    hover_escape,
    shorten,
)
from dashboards.span_tree import RootReason, SpanTree, span_tree

PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#9c755f",
    "#ff9da7",
    "#5c6bc0",
    "#8cd17d",
    "#499894",
    "#d4a6c8",
)
"""Service colors, in order of first appearance; red is kept out because it means "error"."""

ERROR_COLOR = "#d62728"
NEUTRAL_COLOR = "#c8ccd4"
FONT = "Inter, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"

GRID_COLOR = "#eef0f3"
TEMPLATE = {
    "layout": {
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "colorway": PALETTE,
        "font": {"family": FONT, "size": 12, "color": "#1f2328"},
        "hoverlabel": {"align": "left", "font": {"family": FONT, "size": 12}},
        "xaxis": {"gridcolor": GRID_COLOR, "linecolor": GRID_COLOR, "zerolinecolor": GRID_COLOR, "automargin": True},
        "yaxis": {"gridcolor": GRID_COLOR, "linecolor": GRID_COLOR, "zerolinecolor": GRID_COLOR, "automargin": True},
    }
}
"""A light template of our own: Plotly deep-copies a named one such as ``plotly_white`` into every
figure, which costs more than building a small trace's whole figure."""

ROW_PX = 26
"""Waterfall row height in px."""
BAR_THICKNESS = 0.65
"""Waterfall bar thickness as a fraction of a row."""
MAX_WATERFALL_PX = 16_000
"""Cap on the waterfall height; beyond ``MAX_WATERFALL_PX / ROW_PX`` spans the rows get thinner."""
MAX_INDENT = 24
"""Indentation levels drawn in waterfall labels; deeper spans show their depth as a number instead."""
LABEL_FRACTION = 0.34
"""Share of the waterfall's width given to the span label column."""
LABEL_UNITS = 100.0
"""Width of the label column in x2 axis units; text longer than the column is clipped."""
INDENT_UNITS = 2.0
"""Indentation per depth level, in x2 axis units."""
MIN_BAR_FRACTION = 0.002
"""Smallest drawn bar (and icicle tile), as a fraction of the trace's time range, so that zero-length
spans stay visible and clickable."""
MIN_BAR_NS = 1_000
"""Smallest drawn bar in ns when the whole trace lasts (almost) nothing."""
ICICLE_LEVELS = 12
"""Levels the flame graph shows at once; clicking a tile zooms into deeper ones."""
HOVER_ATTRIBUTES = 8
"""Attributes listed in a waterfall hover; the rest are counted."""


@dataclass(frozen=True)
class _Spans:
    """Plain per-row columns of a span frame (``n`` rows), times relative to the trace start."""

    span_id: list[str]
    name: list[str]
    service: list[str]
    kind: list[str]
    status: list[str]
    status_message: list[str]
    offset_ns: list[int]
    duration_ns: list[int]
    attributes: list[dict[str, str]]

    @property
    def end_ns(self) -> int:
        """Latest span end in ns after the trace start (0 for no spans)."""
        return max((o + d for o, d in zip(self.offset_ns, self.duration_ns, strict=True)), default=0)


def service_colors(services: Iterable[str]) -> dict[str, str]:
    """A color per distinct service, assigned in order of first appearance (so the root's service
    gets the first color)."""
    colors: dict[str, str] = {}
    for service in services:
        if service not in colors:
            colors[service] = PALETTE[len(colors) % len(PALETTE)]
    return colors


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


def waterfall_figure(spans: pl.DataFrame, tree: SpanTree | None = None) -> go.Figure:
    """Jaeger-style timeline: one horizontal bar per span, in depth-first order, on an axis of ms since
    the trace start, beside a column of span labels indented by depth.

    Bars are one ``go.Bar`` trace per service (colors from :func:`service_colors`); the labels are one
    text-only ``go.Scatter`` on a second x axis (``x2``), because Plotly tick labels cannot be left-aligned
    and indentation would not show. Every bar and label carries ``customdata = [row, span_id]`` (row in
    ``spans``) for click handling. Zero-length spans get a minimum width (:data:`MIN_BAR_FRACTION`); error
    spans get a red outline; spans drawn as roots because of a broken parent link get a ``⚠`` and the
    reason in their hover.

    Args:
        spans: one trace's spans (see module docstring).
        tree: ``span_tree(spans)`` when the caller already has it.
    """
    if spans.height == 0:
        return empty_figure("No spans in this trace")
    tree = span_tree(spans) if tree is None else tree
    columns = _span_columns(spans)
    colors = service_colors(columns.service[row] for row in tree.order)
    total_ns = columns.end_ns
    min_width_ns = max(total_ns * MIN_BAR_FRACTION, MIN_BAR_NS)
    # Everything below is in display (depth-first) order, as numpy arrays: Plotly validates those
    # without a per-element walk, which matters for traces with thousands of spans.
    order = np.asarray(tree.order, dtype=np.int64)
    duration_ns = np.asarray(columns.duration_ns, dtype=np.int64)[order]
    base_ms = np.asarray(columns.offset_ns, dtype=np.int64)[order] / NS_PER_MS
    width_ms = np.maximum(duration_ns, min_width_ns) / NS_PER_MS
    service = np.asarray(columns.service, dtype=object)[order]
    error = np.asarray([status == "Error" for status in columns.status], dtype=bool)[order]
    customdata = _row_customdata(order, columns.span_id)
    hover = np.asarray([_waterfall_hover(columns, tree, row) for row in tree.order], dtype=object)
    duration_text = np.asarray([format_duration_ns(ns) for ns in duration_ns], dtype=object)
    position = np.arange(tree.size)

    figure = go.Figure(layout={"template": TEMPLATE})
    for name, color in colors.items():
        mask = service == name
        figure.add_trace(
            go.Bar(
                name=name,
                orientation="h",
                y=position[mask],
                base=base_ms[mask],
                x=width_ms[mask],
                # Explicit thickness: Plotly would derive it from the gaps between this service's rows,
                # making a service with rows far apart draw bars several rows thick.
                width=BAR_THICKNESS,
                marker={
                    "color": color,
                    # One outline color for the trace (per-point colors are slow to validate);
                    # width 0 hides it on spans without an error.
                    "line": {"color": ERROR_COLOR, "width": np.where(error[mask], 2, 0)},
                },
                text=duration_text[mask],
                textposition="outside",
                cliponaxis=False,
                textfont={"size": 10, "color": "#4b5563"},
                customdata=customdata[mask],
                hovertext=hover[mask],
                hovertemplate="%{hovertext}<extra></extra>",
                showlegend=False,
            )
        )
    figure.add_trace(
        go.Scatter(
            name="spans",
            xaxis="x2",
            x=np.minimum(np.asarray(tree.depth, dtype=np.int64)[order], MAX_INDENT) * INDENT_UNITS,
            y=position,
            mode="text",
            text=np.asarray([_waterfall_label(columns, tree, row, colors) for row in tree.order], dtype=object),
            textposition="middle right",
            textfont={"size": 11, "color": "#1f2328"},
            cliponaxis=True,
            customdata=customdata,
            hovertext=hover,
            hovertemplate="%{hovertext}<extra></extra>",
            showlegend=False,
        )
    )
    figure.update_layout(
        barmode="overlay",
        height=min(ROW_PX * tree.size + 70, MAX_WATERFALL_PX),
        margin={"l": 4, "r": 50, "t": 40, "b": 10},
        xaxis={
            "domain": [LABEL_FRACTION + 0.01, 1],
            "side": "top",
            "range": [0, (total_ns + min_width_ns) / NS_PER_MS * 1.04],
            "ticksuffix": " ms",
            "exponentformat": "none",
            "separatethousands": True,
            "zeroline": True,
            "zerolinecolor": "#9aa1ad",
        },
        xaxis2={"domain": [0, LABEL_FRACTION], "range": [-0.5, LABEL_UNITS], "visible": False, "fixedrange": True},
        yaxis={
            "range": [tree.size - 0.5, -0.5],
            "tickmode": "array",
            "tickvals": [index + 0.5 for index in range(tree.size - 1)],
            "showticklabels": False,
            "showgrid": True,
            "gridcolor": "#f1f3f6",
            "zeroline": False,
        },
    )
    return figure


def flame_graph_figure(spans: pl.DataFrame, tree: SpanTree | None = None) -> go.Figure:
    """Flame graph of one trace as a Plotly icicle: a tile per span labelled ``"<service>: <name>"``,
    root on top, children below their parent in start order (siblings with equal names stay apart).

    Tile sizes are durations in ns with ``branchvalues="total"``; a parent is widened to the sum of its
    children where they outlast it (parallel or overflowing children), because Plotly draws nothing at
    all when a parent is smaller than its children. Zero-length spans get a minimum size. Several roots
    (orphans, broken links) hang under one synthetic ``trace`` tile, since an icicle needs one root.
    Each tile's ``customdata`` is ``[row, span_id, hover text]`` (row -1 and no span ID for the synthetic
    tile).

    Args:
        spans: one trace's spans (see module docstring).
        tree: ``span_tree(spans)`` when the caller already has it.
    """
    if spans.height == 0:
        return empty_figure("No spans in this trace")
    tree = span_tree(spans) if tree is None else tree
    columns = _span_columns(spans)
    colors = service_colors(columns.service[row] for row in tree.order)
    min_value = max(int(columns.end_ns * MIN_BAR_FRACTION), 1)
    totals = _subtree_totals(tree, [max(duration, min_value) for duration in columns.duration_ns])

    roots = tree.roots()
    synthetic = len(roots) > 1
    ids = [f"s{row}" for row in tree.order]
    parents = [f"s{tree.parent[row]}" if tree.parent[row] != -1 else "" for row in tree.order]
    labels = [hover_escape(shorten(f"{columns.service[row]}: {columns.name[row]}", 80)) for row in tree.order]
    values = [totals[row] for row in tree.order]
    tile_colors = [colors[columns.service[row]] for row in tree.order]
    notes = [_flame_note(columns, tree, row) for row in tree.order]
    row_ids = list(tree.order)
    span_ids = [columns.span_id[row] for row in tree.order]
    if synthetic:
        parents = ["trace" if parent == "" else parent for parent in parents]
        ids.insert(0, "trace")
        parents.insert(0, "")
        labels.insert(0, f"trace ({len(roots)} roots)")
        values.insert(0, sum(totals[row] for row in roots))
        tile_colors.insert(0, NEUTRAL_COLOR)
        notes.insert(0, f"trace duration {format_duration_ns(columns.end_ns)}")
        row_ids.insert(0, -1)
        span_ids.insert(0, "")
    customdata = np.empty((len(ids), 3), dtype=object)
    customdata[:, 0], customdata[:, 1], customdata[:, 2] = row_ids, span_ids, notes

    levels = tree.max_depth + 1 + int(synthetic)
    shown_levels = min(levels, ICICLE_LEVELS)
    figure = go.Figure(
        layout={"template": TEMPLATE},
        data=go.Icicle(
            ids=np.asarray(ids, dtype=object),
            labels=np.asarray(labels, dtype=object),
            parents=np.asarray(parents, dtype=object),
            values=np.asarray(values, dtype=np.int64),
            branchvalues="total",
            sort=False,
            maxdepth=shown_levels if levels > ICICLE_LEVELS else -1,
            tiling={"orientation": "v"},
            marker={"colors": np.asarray(tile_colors, dtype=object), "line": {"color": "#ffffff", "width": 1}},
            customdata=customdata,
            texttemplate="%{label}",
            hovertemplate="<b>%{label}</b><br>%{customdata[2]}<extra></extra>",
            pathbar={"visible": True, "thickness": 20},
            leaf={"opacity": 1},
        ),
    )
    figure.update_layout(
        height=max(240, 60 + 34 * shown_levels),
        margin={"l": 4, "r": 4, "t": 30, "b": 4},
    )
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
                "color": [ERROR_COLOR if row["error_count"] else PALETTE[0] for row in rows],
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


def _span_columns(spans: pl.DataFrame) -> _Spans:
    """Extract the columns the figures use; absent optional columns read as empty."""
    height = spans.height
    starts = spans["start_time_unix_nano"].cast(pl.Int64)
    first = starts.min()
    trace_start = int(first) if first is not None else 0

    def text(column: str) -> list[str]:
        if column not in spans.columns:
            return [""] * height
        return spans[column].cast(pl.String).fill_null("").to_list()

    attributes = (
        [attribute_dict(value) for value in spans["attributes"].to_list()]
        if "attributes" in spans.columns
        else [{} for _ in range(height)]
    )
    return _Spans(
        span_id=text("span_id"),
        name=text("name"),
        service=[service or "(unknown service)" for service in text("service_name")],
        kind=text("kind"),
        status=text("status_code"),
        status_message=text("status_message"),
        offset_ns=(starts.fill_null(trace_start) - trace_start).to_list(),
        # A duration beyond Int64 (an exporter's negative duration stored unsigned) reads as 0.
        duration_ns=spans["duration_ns"].cast(pl.Int64, strict=False).fill_null(0).clip(lower_bound=0).to_list(),
        attributes=attributes,
    )


def _row_customdata(rows: np.ndarray, span_ids: list[str]) -> np.ndarray:
    """``customdata`` of shape ``(len(rows), 2)``: each point's row in the span frame and its span ID."""
    data = np.empty((len(rows), 2), dtype=object)
    data[:, 0] = rows.tolist()
    data[:, 1] = np.asarray(span_ids, dtype=object)[rows]
    return data


def _subtree_totals(tree: SpanTree, own: list[int]) -> list[int]:
    """Per row, ``max(own value, sum of its children's totals)``: the smallest tile sizes that keep every
    parent at least as wide as its children. Children come after parents in DFS order, so walking it
    backwards sees every child before its parent."""
    totals = list(own)
    child_sums = [0] * tree.size
    for row in reversed(tree.order):
        totals[row] = max(own[row], child_sums[row])
        if tree.parent[row] != -1:
            child_sums[tree.parent[row]] += totals[row]
    return totals


def _root_note(tree: SpanTree, row: int) -> str:
    """Why a span looks wrong in the tree, or ``""`` when it does not."""
    notes = []
    if tree.root_reason[row] not in (RootReason.NONE, RootReason.ROOT):
        notes.append(f"shown as a root: {tree.root_reason[row].value}")
    if tree.duplicate[row]:
        notes.append("duplicate span id")
    return "; ".join(notes)


def _waterfall_label(columns: _Spans, tree: SpanTree, row: int, colors: dict[str, str]) -> str:
    """Label column text: a service swatch, service and span name, the depth where indentation stops,
    and ``⚠`` when the span's parent link is broken."""
    depth = tree.depth[row]
    deep = f"[{depth}] " if depth > MAX_INDENT else ""
    warning = " ⚠" if _root_note(tree, row) else ""
    service = hover_escape(shorten(columns.service[row], 22))
    name = hover_escape(shorten(columns.name[row], 60))
    swatch = f"<span style='color:{colors[columns.service[row]]}'>■</span>"
    return f"{swatch} {deep}<span style='color:#6b7280'>{service}</span> {name}{warning}"


def _waterfall_hover(columns: _Spans, tree: SpanTree, row: int) -> str:
    """Hover text of one bar: name, service, timing, kind, status, problems and the first attributes."""
    lines = [
        f"<b>{hover_escape(shorten(columns.name[row], 90))}</b>",
        f"service: {hover_escape(columns.service[row])}",
        f"duration: {format_duration_ns(columns.duration_ns[row])}"
        f" · starts at +{columns.offset_ns[row] / NS_PER_MS:.3f} ms",
    ]
    kind_status = " · ".join(
        part
        for part in (
            f"kind: {columns.kind[row]}" if columns.kind[row] else "",
            f"status: {columns.status[row]}" if columns.status[row] else "",
        )
        if part
    )
    if kind_status:
        lines.append(kind_status)
    if columns.status_message[row]:
        lines.append(f"message: {hover_escape(shorten(columns.status_message[row], 90))}")
    if note := _root_note(tree, row):
        lines.append(f"⚠ {note}")
    lines.append(f"span id: {hover_escape(columns.span_id[row])} · depth {tree.depth[row]}")
    attributes = sorted(columns.attributes[row].items())
    for key, value in attributes[:HOVER_ATTRIBUTES]:
        lines.append(f"{hover_escape(shorten(key, 40))} = {hover_escape(shorten(value, 60))}")
    if len(attributes) > HOVER_ATTRIBUTES:
        lines.append(f"… {len(attributes) - HOVER_ATTRIBUTES} more attributes (click the bar)")
    return "<br>".join(lines)


def _flame_note(columns: _Spans, tree: SpanTree, row: int) -> str:
    """Hover body of one flame-graph tile: real duration (tiles may be widened) and any problem."""
    text = f"duration {format_duration_ns(columns.duration_ns[row])}"
    if columns.status[row] == "Error":
        text += " · error"
    if note := _root_note(tree, row):
        text += f"<br>⚠ {note}"
    return text
