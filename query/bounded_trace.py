"""One trace read by ID, bounded: a page of at most ``limit`` spans by start and, when that page is not the whole
trace, how many spans the trace holds. The REST, Jaeger and Tempo routes answer a trace from it (each says "not
found" and "truncated" in its own format), and the trace page's views are built from its first page
(:mod:`query.trace_view_cache`), so every by-ID read is this one.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from storage.reader import TraceCursor, TraceReader


@dataclass(frozen=True)
class BoundedTrace:
    """A page of one trace.

    Attributes:
        spans: the page's spans (the columns of :meth:`storage.reader.TraceReader.trace`), by start; empty when the
            tenant has no span of the trace (or none after the cursor).
        next: the cursor of the next page; None on the last.
        span_count: spans the whole trace holds: counted by the store only when the page is not the whole trace,
            else the page's; 0 when the tenant has no span of it.
        partial: the page is not the whole trace (a next page, or read after a cursor).
    """

    spans: pl.DataFrame
    next: TraceCursor | None
    span_count: int
    partial: bool


def read_bounded_trace(
    reader: TraceReader,
    trace_id: str,
    *,
    tenant: str | None,
    limit: int,
    after: TraceCursor | None = None,
    span_count: int | None = None,
) -> BoundedTrace:
    """Trace ``trace_id`` (canonical 32 hex) of ``tenant``: its spans after ``after`` (None: from the first), at most
    ``limit``. One read for a trace that fits, two (the page, its size) for one that does not, unless the caller
    counted the trace already (``span_count``, as ``TraceReader.trace_size`` counts). Blocking."""
    page = reader.trace_page(trace_id, tenant=tenant, after=after, limit=limit)
    partial = page.next is not None or after is not None
    if not partial:
        total = page.spans.height
    else:
        total = span_count if span_count is not None else reader.trace_size(trace_id, tenant=tenant)
    return BoundedTrace(page.spans, page.next, total, partial)
