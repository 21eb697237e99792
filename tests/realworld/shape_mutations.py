"""Broken trace shapes as the wild makes them, applied to real captures (issue 27): each mutation takes a span frame
of whole traces (the reader's columns, :mod:`analysis.spans`) and returns the frame an exporter, a framework or a
sampler would have sent instead. The work the spans describe is unchanged, so the request's LLM share must be too.

- ``drop_root``: the root never arrives (an exporter killed mid-run, a sampler that dropped the top).
- ``unended_root``: the root arrives as started, never ended (end == start).
- ``cut_root``: the root ends before its work does (ended at a tenth of its length).
- ``drop_parents``: a framework filters its own spans: every span with children but the root, the model calls
  and the tools is gone, so their children are orphans inside the root's interval.
- ``late_children``: every parent but the root and the model calls returns when its first child starts, so its
  work starts after it returned (an async generator consumed later).
- ``remote_server``: the root's longest child is re-parented under a remote SERVER span (another service) that
  starts when the CLIENT span calling it ends, 1 ms after it began (an A2A / JSON-RPC task answered at once), or
  halfway through the child where it lasts under 2 ms (a public capture's 0.4 ms generation).
- ``linked_orphans``: the root is dropped and every orphan but the shortest carries a span link.
- ``start_copies``: every span is sent twice, the complete copy first, then a copy as started (end == start).
- ``early_parents``: every span with children, the root included, but the model calls and tools (whose own time
  after their children, a streamed answer read after the HTTP request's headers, no other span would describe)
  ends in the middle of its last-starting child, which runs on after it: a handler that returned the stream it
  did not read, a task not awaited, a span ended early by its instrumentation.
- ``skewed_servers``: every service but the root's that answers a CLIENT span of another service (a vLLM engine, a
  tool server, an A2A agent) has its host clock 5 s ahead: all its spans and their events in the trace move by 5 s.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import polars as pl

from units import NS_PER_MS, NS_PER_S

Mutation = Callable[[pl.DataFrame, Collection[str]], pl.DataFrame]
"""``mutation(spans, kept)``: ``kept`` are the span IDs a filtering framework would keep (model calls, tools)."""

START, END = pl.col("start_time_unix_nano"), pl.col("end_time_unix_nano")
IS_ROOT = pl.col("parent_span_id") == ""


def _with_duration(spans: pl.DataFrame) -> pl.DataFrame:
    return spans.with_columns((END - START).cast(pl.UInt64).alias("duration_ns"))


def _parents(spans: pl.DataFrame) -> pl.Expr:
    """True for spans some span of their trace names as parent."""
    named = spans.select("trace_id", pl.col("parent_span_id").alias("span_id")).unique()
    key = pl.concat_str("trace_id", "span_id")
    return key.is_in(named.select(key).to_series().implode())


def drop_root(spans: pl.DataFrame, kept: Collection[str]) -> pl.DataFrame:
    return spans.filter(~IS_ROOT)


def unended_root(spans: pl.DataFrame, kept: Collection[str]) -> pl.DataFrame:
    return _with_duration(spans.with_columns(pl.when(IS_ROOT).then(START).otherwise(END).alias(END.meta.output_name())))


def cut_root(spans: pl.DataFrame, kept: Collection[str]) -> pl.DataFrame:
    cut = START + (END - START) // 10
    return _with_duration(spans.with_columns(pl.when(IS_ROOT).then(cut).otherwise(END).alias(END.meta.output_name())))


def drop_parents(spans: pl.DataFrame, kept: Collection[str]) -> pl.DataFrame:
    return spans.filter(~(_parents(spans) & ~IS_ROOT & ~pl.col("span_id").is_in(list(kept))))


def late_children(spans: pl.DataFrame, kept: Collection[str]) -> pl.DataFrame:
    first_child = spans.group_by("trace_id", "parent_span_id").agg(START.min().alias("first_child_ns"))
    joined = spans.join(
        first_child.rename({"parent_span_id": "span_id"}), on=["trace_id", "span_id"], how="left", maintain_order="left"
    )
    early = pl.col("first_child_ns").is_not_null() & ~IS_ROOT & ~pl.col("span_id").is_in(list(kept))
    ended = pl.when(early).then(pl.max_horizontal(START, pl.col("first_child_ns"))).otherwise(END)
    return _with_duration(joined.with_columns(ended.alias(END.meta.output_name())).drop("first_child_ns"))


def remote_server(spans: pl.DataFrame, kept: Collection[str]) -> pl.DataFrame:
    roots = spans.filter(IS_ROOT).select("trace_id", pl.col("span_id").alias("parent_span_id"))
    heads = (
        spans.join(roots, on=["trace_id", "parent_span_id"], how="semi")
        .sort(END - START, descending=True)
        .unique("trace_id", keep="first")
    )
    client = heads.with_columns(
        pl.concat_str(pl.lit("c1"), pl.col("span_id").str.slice(2)).alias("span_id"),
        pl.lit("a2a.send").alias("name"),
        pl.lit("Client").alias("kind"),
        pl.min_horizontal(START + NS_PER_MS, (START + END) // 2).alias(END.meta.output_name()),
        pl.lit({}, dtype=spans.schema["attributes"]).alias("attributes"),
    )
    server = client.with_columns(
        pl.concat_str(pl.lit("5e"), pl.col("span_id").str.slice(2)).alias("span_id"),
        pl.col("span_id").alias("parent_span_id"),
        pl.lit("a2a.handle").alias("name"),
        pl.lit("Server").alias("kind"),
        pl.lit("a2a-server").alias("service_name"),
        END.alias(START.meta.output_name()),
        heads[END.meta.output_name()].alias(END.meta.output_name()),
    )
    moved = pl.col("span_id").is_in(heads["span_id"].implode())
    heads_server = pl.concat_str(pl.lit("5e"), pl.col("span_id").str.slice(2))
    rest = spans.with_columns(
        pl.when(moved).then(heads_server).otherwise(pl.col("parent_span_id")).alias("parent_span_id")
    )
    return _with_duration(pl.concat([rest, client, server]))


def linked_orphans(spans: pl.DataFrame, kept: Collection[str]) -> pl.DataFrame:
    orphans = drop_root(spans, kept)
    tops = orphans.join(
        spans.filter(IS_ROOT).select("trace_id", pl.col("span_id").alias("parent_span_id")),
        on=["trace_id", "parent_span_id"],
        how="semi",
    )
    shortest = (
        tops.sort(END - START).unique("trace_id", keep="first").select("trace_id", pl.col("span_id").alias("target"))
    )
    top_ids = tops["span_id"].implode()
    linking = pl.col("span_id").is_in(top_ids) & (pl.col("span_id") != pl.col("target"))
    return (
        orphans.join(shortest, on="trace_id", how="left", maintain_order="left")
        .with_columns(
            pl.when(linking).then(pl.concat_list("target")).otherwise(pl.col("link_span_ids")).alias("link_span_ids"),
            pl.when(linking)
            .then(pl.concat_list("trace_id"))
            .otherwise(pl.col("link_trace_ids"))
            .alias("link_trace_ids"),
            pl.when(linking)
            .then(pl.lit([{}], dtype=spans.schema["link_attributes"]))
            .otherwise(pl.col("link_attributes"))
            .alias("link_attributes"),
        )
        .drop("target")
    )


def start_copies(spans: pl.DataFrame, kept: Collection[str]) -> pl.DataFrame:
    return _with_duration(pl.concat([spans, spans.with_columns(START.alias(END.meta.output_name()))]))


def early_parents(spans: pl.DataFrame, kept: Collection[str]) -> pl.DataFrame:
    last_child = (
        spans.group_by("trace_id", "parent_span_id")
        .agg(((START + END) // 2).sort_by(START).last().alias("middle_ns"))
        .rename({"parent_span_id": "span_id"})
    )
    joined = spans.join(last_child, on=["trace_id", "span_id"], how="left", maintain_order="left")
    middle = pl.when(~pl.col("span_id").is_in(list(kept))).then(pl.col("middle_ns"))
    ended = pl.when(middle.is_not_null()).then(pl.min_horizontal(END, pl.max_horizontal(START, middle))).otherwise(END)
    return _with_duration(joined.with_columns(ended.alias(END.meta.output_name())).drop("middle_ns"))


def skewed_servers(spans: pl.DataFrame, kept: Collection[str]) -> pl.DataFrame:
    callers = spans.select(
        "trace_id",
        pl.col("span_id").alias("parent_span_id"),
        pl.col("kind").alias("parent_kind"),
        pl.col("service_name").alias("parent_service"),
    )
    answering = spans.join(callers, on=["trace_id", "parent_span_id"]).filter(
        (pl.col("kind") == "Server")
        & (pl.col("parent_kind") == "Client")
        & (pl.col("service_name") != pl.col("parent_service"))
    )
    skewed = (
        answering.select("trace_id", "service_name")
        .unique()
        .join(spans.filter(IS_ROOT).select("trace_id", "service_name"), on=["trace_id", "service_name"], how="anti")
    )
    joined = spans.join(
        skewed.with_columns(pl.lit(True).alias("skewed")),
        on=["trace_id", "service_name"],
        how="left",
        maintain_order="left",
    )
    ahead = pl.col("skewed").fill_null(False)
    events = pl.col("event_times_unix_nano")
    return joined.with_columns(
        pl.when(ahead).then(START + 5 * NS_PER_S).otherwise(START).alias(START.meta.output_name()),
        pl.when(ahead).then(END + 5 * NS_PER_S).otherwise(END).alias(END.meta.output_name()),
        pl.when(ahead)
        .then(events.list.eval(pl.element() + 5 * NS_PER_S))
        .otherwise(events)
        .alias("event_times_unix_nano"),
    ).drop("skewed")


MUTATIONS: dict[str, Mutation] = {
    mutation.__name__: mutation
    for mutation in (
        drop_root,
        unended_root,
        cut_root,
        drop_parents,
        late_children,
        remote_server,
        linked_orphans,
        start_copies,
        early_parents,
        skewed_servers,
    )
}
