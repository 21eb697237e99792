"""Example traces behind an aggregate row, slowest first: the requests where a stage took longest, the traces
holding a (service, operation)'s heaviest self time.

Both read the trace pipeline's tables through :class:`query.analysis_service.AnalysisService` for a window
(``storage.analysis_store.AnalysisFilter``), newest first and bounded (:data:`POOL`); the examples are the slowest
within that pool. A row's full list is its search, prefilled with its scope and sorted longest first
(:mod:`query.trace_search`).
"""

from __future__ import annotations

import polars as pl

from analysis import STAGES
from query.analysis_service import AnalysisService
from storage.analysis_store import AnalysisFilter

POOL = 2_000
"""Newest analysed requests (or spans, for hotspots: ten times as many) the examples are picked from."""
EXAMPLES = 3
"""Example traces per row."""


def stage_examples(
    analysis: AnalysisService, where: AnalysisFilter, *, tenant: str | None, examples: int = EXAMPLES
) -> dict[str, list[str]]:
    """Per stage of :data:`analysis.STAGES`, the trace IDs of the requests of the window where it took longest
    (critical-path ns), longest first, at most ``examples``; stages no request spent time in are absent. Only
    traces whose spans are kept are examples (tail sampling may have dropped the others')."""
    summaries = analysis.trace_summaries(where, POOL, tenant=tenant).filter(pl.col("sampled"))
    found: dict[str, list[str]] = {}
    for stage in STAGES:
        column = f"{stage}_ns"
        if column not in summaries.columns:
            continue
        top = summaries.filter(pl.col(column) > 0).sort(column, "trace_id", descending=[True, False]).head(examples)
        if top.height:
            found[stage] = top["trace_id"].to_list()
    return found


def hotspot_examples(
    analysis: AnalysisService, where: AnalysisFilter, *, tenant: str | None, examples: int = EXAMPLES
) -> dict[tuple[str, str], list[str]]:
    """Per (service, operation) of the window's analysed spans, the trace IDs holding its spans with the most
    self time, heaviest first, each trace once, at most ``examples``."""
    spans = analysis.span_rows(where, POOL * 10, tenant=tenant)
    if not spans.height:
        return {}
    heaviest = (
        spans.sort("self_time_ns", descending=True)
        .unique(["service_name", "name", "trace_id"], keep="first", maintain_order=True)
        .group_by("service_name", "name", maintain_order=True)
        .agg(pl.col("trace_id").head(examples))
    )
    return {(row["service_name"], row["name"]): row["trace_id"] for row in heaviest.iter_rows(named=True)}
