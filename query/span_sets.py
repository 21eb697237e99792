"""Span sets, the Tempo way: the newest traces with a span meeting every span filter (of any size among every match
of the window, whole-trace duration bounds applied in the store), each with the first spans that met them. What
Grafana's Tempo data source lists for a TraceQL or tag search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from storage.reader import TraceQuery, TraceReader


@dataclass(frozen=True)
class SpanSets:
    """A span-set search's answer.

    Attributes:
        traces: summaries of the found traces (``storage.reader.SEARCH_COLUMNS``, times in ns), in no order.
        matched: of those traces, the spans that met the filters, the first ``per_trace`` by start per trace
            (:meth:`storage.reader.TraceReader.matched_spans` columns); None when no trace was found.
    """

    traces: pl.DataFrame
    matched: pl.DataFrame | None


def find_span_sets(
    reader: TraceReader,
    query: TraceQuery,
    *,
    tenant: str | None,
    min_trace_duration_ns: int | None,
    max_trace_duration_ns: int | None,
    per_trace: int,
    keys: Sequence[str] = (),
) -> SpanSets:
    """The ``query.limit`` newest traces of ``tenant`` matching ``query`` whose whole duration (ns) lies within the
    bounds (None leaves one open), and their first ``per_trace`` matching spans with the attributes named in
    ``keys``. Two reads; one when nothing is found. Blocking.

    Raises:
        storage.clickhouse.StorageError: the store failed.
    """
    traces = reader.ranked_search(
        query,
        "newest",
        tenant=tenant,
        min_trace_duration_ns=min_trace_duration_ns,
        max_trace_duration_ns=max_trace_duration_ns,
    )
    ids = traces["trace_id"].to_list()
    if not ids:
        return SpanSets(traces, None)
    matched = reader.matched_spans(ids, query, tenant=tenant, per_trace=per_trace, keys=keys)
    return SpanSets(traces, matched)
