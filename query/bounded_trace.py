"""One trace read by ID, bounded: a page of at most ``limit`` spans by start and, when that page is not the whole
trace, how many spans the trace holds. The REST, Jaeger and Tempo routes answer a trace from it (each says "not
found" and "truncated" in its own format), and the trace page's views are built from its first page
(:mod:`query.trace_view_cache`), so every by-ID read is this one; :func:`read_bounded_traces` is it for many IDs
at once (Jaeger's ``/api/traces?traceID=...``).
"""

from __future__ import annotations

from collections.abc import Sequence
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


def read_bounded_traces(
    reader: TraceReader, trace_ids: Sequence[str], *, tenant: str | None, limit: int
) -> dict[str, BoundedTrace]:
    """:func:`read_bounded_trace` from the first span of each of ``trace_ids`` (canonical 32 hex), in a few reads
    whatever their number: one counts every trace, one reads the traces that fit ``limit`` together (in groups of at
    most ``limit`` spans, so memory stays as for one trace), and each larger trace is paged alone. Unknown IDs are
    absent. Blocking. One read per ID took 13 s for Jaeger's 141-trace demo capture on chDB, 0.1 s each."""
    sizes = reader.trace_sizes(trace_ids, tenant=tenant)
    found: dict[str, BoundedTrace] = {}
    group: list[str] = []
    group_spans = 0
    fitting = [trace_id for trace_id in dict.fromkeys(trace_ids) if 0 < sizes.get(trace_id, 0) <= limit]
    for trace_id in [*fitting, ""]:
        if group and (not trace_id or group_spans + sizes[trace_id] > limit):
            spans = reader.traces(group, tenant=tenant).drop("tenant")
            for (key,), frame in spans.partition_by("trace_id", as_dict=True, maintain_order=True).items():
                found[str(key)] = BoundedTrace(frame, None, frame.height, False)
            group, group_spans = [], 0
        if trace_id:
            group.append(trace_id)
            group_spans += sizes[trace_id]
    for trace_id, size in sizes.items():
        if size > limit:
            found[trace_id] = read_bounded_trace(reader, trace_id, tenant=tenant, limit=limit, span_count=size)
    return found
