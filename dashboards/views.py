"""Plain data the pages render besides figures: trace header facts, a span's details, search-result
rows. Pure functions over reader frames, tested without a browser."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from dashboards.format import NS_PER_MS, attribute_dict, format_duration_ns, format_time_ns
from dashboards.span_tree import RootReason, SpanTree


@dataclass(frozen=True)
class TraceSummary:
    """Facts for a trace page header.

    Attributes:
        trace_id: lowercase hex.
        root_service, root_name: of the first root in display order (a true root when there is one).
        start_ns: earliest span start, Unix ns.
        duration_ns: earliest start to latest end, ns.
        span_count, service_count, error_count: counts over all spans.
        depth: number of levels (1 for a flat trace).
        broken_links: spans drawn as roots although they name a parent (missing, self or cycle).
        duplicate_ids: spans whose ID an earlier span already has.
    """

    trace_id: str
    root_service: str
    root_name: str
    start_ns: int
    duration_ns: int
    span_count: int
    service_count: int
    error_count: int
    depth: int
    broken_links: int
    duplicate_ids: int


@dataclass(frozen=True)
class SpanDetail:
    """One span as the detail panel shows it.

    Attributes:
        title: ``"<service>: <span name>"``.
        fields: ``(label, text)`` pairs: IDs, kind, status, start offset and duration (human units).
        attributes, resource_attributes: ``(key, value)`` sorted by key.
        events: ``(offset from trace start as text, name, attributes as "k=v, ...")``.
    """

    title: str
    fields: list[tuple[str, str]]
    attributes: list[tuple[str, str]]
    resource_attributes: list[tuple[str, str]]
    events: list[tuple[str, str, str]]


def trace_summary(trace_id: str, spans: pl.DataFrame, tree: SpanTree) -> TraceSummary:
    """Header facts of one non-empty trace (``spans`` as the reader returns them, ``tree`` built over it).

    Raises:
        ValueError: ``spans`` has no rows.
    """
    if spans.height == 0:
        raise ValueError("a trace summary needs at least one span")
    root = tree.roots()[0]
    starts = spans["start_time_unix_nano"].cast(pl.Int64)
    ends = starts + spans["duration_ns"].cast(pl.Int64, strict=False).fill_null(0)
    start_ns = int(starts.min())
    status = spans["status_code"] if "status_code" in spans.columns else pl.Series([""] * spans.height)
    return TraceSummary(
        trace_id=trace_id,
        root_service=str(spans["service_name"][root] or ""),
        root_name=str(spans["name"][root] or ""),
        start_ns=start_ns,
        duration_ns=int(ends.max()) - start_ns,
        span_count=spans.height,
        service_count=spans["service_name"].n_unique(),
        error_count=int((status == "Error").sum()),
        depth=tree.max_depth + 1,
        broken_links=sum(reason not in (RootReason.NONE, RootReason.ROOT) for reason in tree.root_reason),
        duplicate_ids=sum(tree.duplicate),
    )


def find_span_row(spans: pl.DataFrame, row: int | None, span_id: str | None) -> int | None:
    """The row a click pointed at: ``row`` when it still holds ``span_id`` (the trace may have grown since
    the figure was drawn), else the first row with ``span_id``, else None."""
    ids = spans["span_id"]
    if row is not None and 0 <= row < spans.height and ids[row] == span_id:
        return row
    matches = ids.eq(span_id).arg_true() if span_id else pl.Series([], dtype=pl.UInt32)
    return int(matches[0]) if matches.len() else None


def span_detail(spans: pl.DataFrame, row: int) -> SpanDetail:
    """Details of the span at ``row`` of a reader frame; times shown relative to the trace start."""
    span = spans.row(row, named=True)
    trace_start = int(spans["start_time_unix_nano"].min())
    offset_ns = int(span["start_time_unix_nano"]) - trace_start
    status = span.get("status_code") or ""
    if span.get("status_message"):
        status = f"{status}: {span['status_message']}"
    fields = [
        ("Span ID", span["span_id"]),
        ("Parent span ID", span["parent_span_id"] or "(none)"),
        ("Kind", span.get("kind") or ""),
        ("Status", status),
        ("Start", f"+{offset_ns / NS_PER_MS:.3f} ms ({format_time_ns(int(span['start_time_unix_nano']))})"),
        ("Duration", format_duration_ns(int(span["duration_ns"] or 0))),
    ]
    if span.get("scope_name"):
        fields.append(("Scope", f"{span['scope_name']} {span.get('scope_version') or ''}".strip()))
    events = [
        (
            f"+{(int(time_ns) - trace_start) / NS_PER_MS:.3f} ms",
            str(name),
            ", ".join(f"{k}={v}" for k, v in sorted(attribute_dict(attributes).items())),
        )
        for time_ns, name, attributes in zip(
            span.get("event_times_unix_nano") or [],
            span.get("event_names") or [],
            span.get("event_attributes") or [],
            strict=False,
        )
    ]
    return SpanDetail(
        title=f"{span['service_name']}: {span['name']}",
        fields=[(label, str(value)) for label, value in fields],
        attributes=sorted(attribute_dict(span.get("attributes")).items()),
        resource_attributes=sorted(attribute_dict(span.get("resource_attributes")).items()),
        events=events,
    )


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
