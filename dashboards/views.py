"""Plain data the search page renders besides its figure: the result grid's rows. Pure functions over reader
frames, tested without a browser."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from dashboards.format import NS_PER_MS, format_time_ns


def search_rows(summaries: pl.DataFrame, trace_href: Callable[[str], str]) -> list[dict[str, object]]:
    """Rows for the search result grid, one per trace in the reader's order.

    Keys: ``trace`` (Markdown link to ``trace_href(trace_id)``), ``trace_id``, ``root_service``,
    ``root_name``, ``start`` (UTC text without zone), ``duration_ms`` (float, ms), ``span_count``, ``service_count``,
    ``error_count``, ``hotspot_count``.
    """
    return [
        {
            "trace": f"[{row['trace_id'][:16]}]({trace_href(row['trace_id'])})",
            "trace_id": row["trace_id"],
            "root_service": row["root_service"],
            "root_name": row["root_name"],
            "start": format_time_ns(int(row["start_time_unix_nano"]), zone=False),
            "duration_ms": round(int(row["duration_ns"]) / NS_PER_MS, 3),
            "span_count": int(row["span_count"]),
            "service_count": int(row["service_count"]),
            "error_count": int(row["error_count"]),
            "hotspot_count": int(row["hotspot_count"]),
        }
        for row in summaries.iter_rows(named=True)
    ]
