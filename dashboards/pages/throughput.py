"""Throughput page (``/ui/throughput``): each vLLM engine configuration's achieved throughput against its
latency per time bucket, with the Pareto frontier highlighted and each point linked to example traces
(:meth:`query.service.QueryService.throughput_latency`, the same read as ``GET /api/v1/throughput-latency``)."""

from __future__ import annotations

from typing import cast

import plotly.graph_objects as go
from dash import Dash, Output, dcc, html
from dash.development.base_component import Component

from dashboards.controls import (
    choice_field,
    chosen_rollup_window,
    page_url,
    radio_field,
    section,
    url_output,
    window_inputs,
    window_page,
)
from dashboards.figures import empty_figure
from dashboards.links import drilldown, search_href
from dashboards.pages import Page
from dashboards.tenancy import read_tenant
from dashboards.throughput_figures import AXIS_TITLES, throughput_latency_figure, throughput_table
from query.service import QueryService
from query.store import EngineWindow, StorageError
from query.throughput_latency import LATENCIES, THROUGHPUTS, Latency, Throughput
from units import NS_PER_S

BUCKETS = {"window": "whole window", "60": "1 min", "300": "5 min", "900": "15 min", "3600": "1 h"}
"""Bucket choices (seconds, or the whole window as one bucket) → labels."""
_GRAPH_CONFIG = {"displaylogo": False, "responsive": True}


def layout(**query: str) -> Component:
    """Window, bucket, objectives and model (from the URL); the scatter and the table, filled by the callback."""
    bucket = query.get("bucket") if query.get("bucket") in BUCKETS else "window"
    rate = query.get("rate") if query.get("rate") in THROUGHPUTS else THROUGHPUTS[0]
    latency = query.get("latency") if query.get("latency") in LATENCIES else "e2e_p95_ms"
    fields = [
        choice_field("Bucket", "throughput-bucket", BUCKETS, bucket),
        radio_field("Throughput", "throughput-rate", {key: AXIS_TITLES[key] for key in THROUGHPUTS}, rate),
        radio_field("Latency", "throughput-latency", {key: AXIS_TITLES[key] for key in LATENCIES}, latency),
    ]
    return window_page(
        "throughput",
        section(
            "Throughput against latency",
            "one point per engine configuration and bucket; ringed: the Pareto frontier",
            dcc.Loading(
                dcc.Graph(id="throughput-scatter", figure=empty_figure("Loading…"), config=_GRAPH_CONFIG), type="dot"
            ),
        ),
        section("Configurations", "vLLM's llm_request spans, frontier first", html.Div(id="throughput-table")),
        fields=fields,
        query=query,
        scopes=("model",),
    )


def register_callbacks(app: Dash, query: QueryService) -> None:
    """Fill the page from the query room for the chosen window and the caller's tenant."""

    @app.callback(
        Output("throughput-scatter", "figure"),
        Output("throughput-table", "children"),
        Output("throughput-message", "children"),
        url_output("throughput"),
        *window_inputs("throughput", "bucket", "rate", "latency", "model"),
    )
    def load(
        lookback: str | None,
        bucket: str | None,
        rate: str | None,
        latency: str | None,
        model: str | None,
        _: int | None,
    ) -> tuple[go.Figure, Component, str, str]:
        bucket = bucket if bucket in BUCKETS else "window"
        rate = rate if rate in THROUGHPUTS else THROUGHPUTS[0]
        latency = latency if latency in LATENCIES else "e2e_p95_ms"
        model = (model or "").strip() or None
        url = page_url(lookback, bucket=bucket, rate=rate, latency=latency, model=model)
        tenant = read_tenant()
        try:
            start, end, _step = chosen_rollup_window(query, lookback, tenant)
            width = end - start + 1 if bucket == "window" else int(bucket) * NS_PER_S
            view = query.throughput_latency(
                EngineWindow(start, end, width, model=model),
                throughput=cast(Throughput, rate),
                latency=cast(Latency, latency),
                tenant=tenant,
            )
        except (StorageError, ValueError) as exc:
            return empty_figure("No data"), html.Div(), str(exc), url
        prefix = app.get_relative_path("/").rstrip("/")

        def drill(trace_ids: list[str], point_model: str) -> Component:
            return drilldown(prefix, trace_ids, search_href(prefix, lookback=lookback, model=point_model or None))

        figure = throughput_latency_figure(view.points, rate, latency)
        return figure, throughput_table(view.points, drill), "", url


PAGE = Page(
    module=__name__,
    path="/throughput",
    name="Throughput",
    layout=layout,
    register_callbacks=register_callbacks,
    title="Throughput · Hotspan",
)
