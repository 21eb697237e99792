"""Plain data the search page renders besides its figure: the result grid's rows. Pure functions over reader
frames, tested without a browser."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from dashboards.colors import stage_label
from dashboards.format import format_time_ns


def search_rows(traces: pl.DataFrame, trace_href: Callable[[str], str]) -> list[dict[str, object]]:
    """Rows for the search result grid, one per trace in the given order.

    Args:
        traces: ``query.trace_search.SearchResult.traces`` (the store's summary columns; the model-use columns
            when present).
        trace_href: a trace ID's page.

    Returns:
        Per row: ``trace`` (Markdown: a link showing the whole ID, since the 16-character prefix a narrower column
        would show is no ID the lookup box can find, and below it the start: the grid's first column holds both, as
        a column of its own for the start pushed the model-use columns off a 1280 px screen), ``trace_id``,
        ``root_service``, ``root_name``, ``start`` (UTC text without zone), ``duration_ns`` (int ns; the grid
        formats it with its unit), ``span_count``, ``service_count``, ``error_count``, ``hotspot_count``,
        ``llm_calls`` (None until analysed), ``input_tokens``, ``output_tokens`` (None until analysed), ``cost``
        (text, 4 decimals, in the currency the grid's header names; ``""`` without), ``dominant_stage`` (a stage's
        name for people, ``""`` until analysed).
    """
    rows = []
    for row in traces.iter_rows(named=True):
        cost = row.get("cost")
        stage = row.get("dominant_stage")
        start = format_time_ns(int(row["start_time_unix_nano"]), zone=False)
        rows.append(
            {
                "trace": f"[{row['trace_id']}]({trace_href(row['trace_id'])})\n\n{start}",
                "trace_id": row["trace_id"],
                "root_service": row["root_service"],
                "root_name": row["root_name"],
                "start": start,
                "duration_ns": int(row["duration_ns"]),
                "span_count": int(row["span_count"]),
                "service_count": int(row["service_count"]),
                "error_count": int(row["error_count"]),
                "hotspot_count": int(row["hotspot_count"]),
                "llm_calls": row.get("llm_calls"),
                "input_tokens": row.get("input_tokens"),
                "output_tokens": row.get("output_tokens"),
                "cost": f"{cost:.4f}" if cost is not None else "",
                "dominant_stage": stage_label(stage) if stage else "",
            }
        )
    return rows
