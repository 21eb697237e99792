"""Hand-built span frames shaped like ``TraceReader.trace``'s, for tests of the pure builders (analysis views,
dashboard panels) that need no store."""

from __future__ import annotations

import polars as pl

T0_NS = 1_730_000_000_000_000_000
"""An epoch-ns trace start large enough that float conversion would lose ns (2024-10-27)."""

SPAN_SCHEMA = {
    "trace_id": pl.String,
    "span_id": pl.String,
    "parent_span_id": pl.String,
    "name": pl.String,
    "service_name": pl.String,
    "kind": pl.String,
    "start_time_unix_nano": pl.Int64,
    "end_time_unix_nano": pl.Int64,
    "duration_ns": pl.UInt64,
    "status_code": pl.String,
    "status_message": pl.String,
    "attributes": pl.Map(pl.String, pl.String),
}


def spans_frame(
    rows: list[tuple[str, str, int, int]], *, service: str = "svc", trace_id: str = "ab" * 16
) -> pl.DataFrame:
    """A span frame shaped like ``TraceReader.trace``'s from ``(span_id, parent_id, start offset ns,
    duration ns)`` rows; names are ``op-<span_id>``, services alternate ``svc-a``/``svc-b`` unless one is
    given, and every span carries one attribute."""
    services = [service if service != "svc" else ("svc-a", "svc-b")[i % 2] for i in range(len(rows))]
    return pl.DataFrame(
        {
            "trace_id": [trace_id] * len(rows),
            "span_id": [r[0] for r in rows],
            "parent_span_id": [r[1] for r in rows],
            "name": [f"op-{r[0]}" for r in rows],
            "service_name": services,
            "kind": ["Internal"] * len(rows),
            "start_time_unix_nano": [T0_NS + r[2] for r in rows],
            "end_time_unix_nano": [min(T0_NS + r[2] + r[3], 2**63 - 1) for r in rows],
            "duration_ns": [r[3] for r in rows],
            "status_code": ["Unset"] * len(rows),
            "status_message": [""] * len(rows),
            "attributes": [{"index": str(i)} for i in range(len(rows))],
        },
        schema=SPAN_SCHEMA,
    )
