"""Trace search the Jaeger / Tempo way: span filters, a whole-trace duration filter, a sort chosen on the server,
and each result with its model use (LLM calls, tokens, cost, dominant stage).

The store's search (``storage.reader.TraceReader.search``) finds the traces with a span meeting every span
filter, the most recently active first. A sort other than "newest" or a trace-duration bound is ranked in the store
over *every* matching trace of the window (``TraceReader.ranked_search``), so a result is the longest (say) of all
matches, not of the newest few thousand nor of the 20 a page shows. Model use comes from the trace pipeline's
summaries (``AnalysisService.trace_usage``): traces not analysed yet have none, and rank last by tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, get_args

import polars as pl

from analysis import STAGES
from query.analysis_service import AnalysisService
from storage.reader import TraceQuery, TraceReader

Sort = Literal["newest", "oldest", "longest", "shortest", "most_errors", "most_spans", "most_tokens", "longest_stage"]
SORTS: tuple[Sort, ...] = get_args(Sort)
SORT_LABELS: dict[Sort, str] = {
    "newest": "Most recent",
    "oldest": "Oldest",
    "longest": "Longest first",
    "shortest": "Shortest first",
    "most_errors": "Most errors",
    "most_spans": "Most spans",
    "most_tokens": "Most tokens",
    "longest_stage": "Stage time",
}
_SORT_KEYS: dict[Sort, tuple[str, bool]] = {
    "newest": ("start_time_unix_nano", True),
    "oldest": ("start_time_unix_nano", False),
    "longest": ("duration_ns", True),
    "shortest": ("duration_ns", False),
    "most_errors": ("error_count", True),
    "most_spans": ("span_count", True),
    "most_tokens": ("tokens", True),
    "longest_stage": ("stage_ns", True),
}
USAGE_COLUMNS = {
    "llm_calls": pl.UInt32,
    "input_tokens": pl.UInt64,
    "output_tokens": pl.UInt64,
    "cached_input_tokens": pl.UInt64,
    "reasoning_tokens": pl.UInt64,
    "dominant_stage": pl.String,
    "stage_ns": pl.UInt64,
    "cost": pl.Float64,
}


@dataclass(frozen=True)
class TraceSearch:
    """A search: the store's span filters (``query``; its ``limit`` is replaced), bounds on the whole trace's
    duration (first span start to last span end, ns; None leaves one open), the sort, the rows wanted, and the
    stage (an ``analysis.STAGES`` name) the ``longest_stage`` sort ranks by: the analysed traces that spent time in
    it, the most first (how a Stages page row lists its requests)."""

    query: TraceQuery
    min_trace_duration_ns: int | None = None
    max_trace_duration_ns: int | None = None
    sort: Sort = "newest"
    limit: int = 20
    stage: str = ""


@dataclass(frozen=True)
class SearchResult:
    """Found traces and how they were found.

    Attributes:
        traces: ``storage.reader.SEARCH_COLUMNS`` plus :data:`USAGE_COLUMNS` (null until analysed), ``tokens``
            (input plus output, 0 until analysed) and ``currency`` (of ``cost``), in the asked order.
        ranked: the store ranked every matching trace (a sort other than newest, or a trace-duration bound).
    """

    traces: pl.DataFrame
    ranked: bool


def search_traces(
    reader: TraceReader, analysis: AnalysisService | None, search: TraceSearch, *, tenant: str | None
) -> SearchResult:
    """Run ``search`` (module docstring) for ``tenant`` (None: every tenant, admin only).

    Raises:
        ValueError: an unknown sort, a limit below 1, a minimum trace duration above the maximum, or the
            ``longest_stage`` sort without a known stage.
        storage.clickhouse.StorageError: the store failed.
    """
    if search.sort not in SORTS:
        raise ValueError(f"unknown sort {search.sort!r}: one of {', '.join(SORTS)}")
    if search.limit < 1:
        raise ValueError("limit must be at least 1")
    if search.sort == "longest_stage" and search.stage not in STAGES:
        raise ValueError(f"sort by stage needs one of {', '.join(STAGES)}, not {search.stage!r}")
    low, high = search.min_trace_duration_ns, search.max_trace_duration_ns
    if low is not None and high is not None and low > high:
        raise ValueError("min trace duration is above max trace duration")
    ranked = search.sort != "newest" or low is not None or high is not None
    query = replace(search.query, limit=search.limit)
    if ranked:
        found = reader.ranked_search(
            query,
            search.sort,
            tenant=tenant,
            min_trace_duration_ns=low,
            max_trace_duration_ns=high,
            stage=search.stage if search.sort == "longest_stage" else "",
        )
    else:
        found = reader.search(query, tenant=tenant)
    column, descending = _SORT_KEYS[search.sort]
    found = _with_usage(found, analysis, tenant, search.stage).sort(column, "trace_id", descending=[descending, False])
    return SearchResult(found, ranked)


def _with_usage(traces: pl.DataFrame, analysis: AnalysisService | None, tenant: str | None, stage: str) -> pl.DataFrame:
    """``traces`` with :data:`USAGE_COLUMNS` (``stage_ns`` of ``stage``), ``tokens`` and ``currency`` joined from
    the pipeline's summaries."""
    usage = (
        analysis.trace_usage(traces["trace_id"].to_list(), tenant=tenant, stage=stage)
        if analysis is not None and traces.height
        else pl.DataFrame(schema={"trace_id": pl.String} | USAGE_COLUMNS)
    )
    usage = usage.select("trace_id", *(pl.col(name).cast(dtype) for name, dtype in USAGE_COLUMNS.items()))
    currency = analysis.currency if analysis is not None else None
    return traces.join(usage, on="trace_id", how="left", maintain_order="left").with_columns(
        (pl.col("input_tokens").fill_null(0) + pl.col("output_tokens").fill_null(0)).alias("tokens"),
        pl.when(pl.col("llm_calls").is_not_null()).then(pl.lit(currency)).alias("currency"),
    )
