"""The trace pipeline's tables: its work list, the rows it writes, and the window aggregates read from them.

Tables (migrations 0010-0015; SQL in :mod:`storage.analysis_sql`):

- ``hotspan_trace_arrivals``: per (owner tenant, trace), the last arrival time and the arrived span count,
  maintained by a materialized view on ``otel_traces`` (the pipeline's durable work list).
- ``hotspan_span_analysis``: per span, :data:`SPAN_ANALYSIS_SCHEMA`.
- ``hotspan_trace_summary``: per trace, :data:`TRACE_SUMMARY_SCHEMA`, sorted by trace; the same rows sorted by start
  in ``hotspan_trace_summary_by_time`` (migrations 0110-0112), which every read of a window of requests uses.

A conversation (:meth:`AnalysisStore.conversations`, :meth:`AnalysisStore.conversation_turns`; SQL in
:mod:`storage.conversation_sql`) is the summaries naming one ``ConversationId`` (migration 0090).

Both derived tables are ReplacingMergeTree by ``Version``: writing a trace again (late spans) supersedes the
earlier rows, and every read here uses ``FINAL``, so a trace is counted once.

Tenancy: every read takes a keyword-only ``tenant`` (``storage.tenancy``): a name reads that owner tenant's
rows only, ``None`` every tenant (admin only). It has no default on purpose, as in :mod:`storage.reader`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Literal, Protocol

import polars as pl
import pyarrow as pa

from storage import analysis_sql, conversation_sql, dependency_rollup
from storage.clickhouse import ClickHouse
from storage.conversation_sql import ConversationOrder
from storage.layout import mutation_statement
from storage.partitions import split_by_day
from storage.tenancy import tenant_parameters

GroupBy = Literal["service", "model", "tenant", ""]
"""Grouping of the window aggregates (:data:`storage.analysis_sql.GROUP_COLUMNS`): the request's root service,
its model, the tenant its spans name, or ``""`` for one group of every request."""
RankingOrder = Literal["self_total_ns", "self_p95_ns"]

FLAME_NODE_COLUMNS = {
    "node": pl.UInt64,
    "parent": pl.UInt64,
    "depth": pl.UInt32,
    "service_name": pl.String,
    "name": pl.String,
    "self_ns": pl.UInt64,
    "count": pl.UInt64,
}
"""One row per flame-graph node: ``node``/``parent`` path hashes (``parent`` 0 at the top), depth, service and
span name, summed self time (ns) and span count. :meth:`AnalysisStore.flame_nodes` reads these (and
``traces``); ``processors.pipeline.flame.flame_graph`` takes them."""

SPAN_ANALYSIS_SCHEMA = pa.schema(
    [
        ("Tenant", pa.string()),
        ("Timestamp", pa.timestamp("ns")),
        ("TraceId", pa.string()),
        ("SpanId", pa.string()),
        ("ParentSpanId", pa.string()),
        ("ServiceName", pa.string()),
        ("SpanName", pa.string()),
        ("SpanKind", pa.string()),
        ("Stage", pa.string()),
        ("DurationNs", pa.uint64()),
        ("SelfTimeNs", pa.uint64()),
        ("OnCriticalPath", pa.bool_()),
        ("CriticalPathNs", pa.uint64()),
        ("Depth", pa.uint32()),
        ("FlameNode", pa.uint64()),
        ("FlameParent", pa.uint64()),
        ("IsError", pa.bool_()),
        ("RequestTenant", pa.string()),
        ("IsHotspot", pa.bool_()),
        ("HotspotReason", pa.string()),
        ("HotspotThresholdMs", pa.float64()),
        ("Version", pa.uint64()),
        ("Model", pa.string()),
        ("LlmCall", pa.bool_()),
        ("InputTokens", pa.uint64()),
        ("OutputTokens", pa.uint64()),
        ("CachedInputTokens", pa.uint64()),
        ("ReasoningTokens", pa.uint64()),
        ("TtftNs", pa.uint64()),
    ]
)
"""Arrow layout of ``hotspan_span_analysis`` rows. Tenant: the owner tenant (never ``""``); Timestamp: span
start (ns since the epoch); ParentSpanId: the resolved parent (``""`` for a root, orphans included); Stage: the
span's stage (a span split into vLLM phases gets its longest phase); DurationNs, SelfTimeNs, CriticalPathNs:
ns; Depth: ancestors above the span; FlameNode/FlameParent: hashes of the ``service:operation`` path from the
root to the span and to its parent (0 for a root); RequestTenant: the tenant the request's spans name
(``""`` when none); HotspotReason: ``static``, ``p95``, ``sdk`` or ``""``; HotspotThresholdMs: the threshold
crossed (null when not flagged, or when an SDK flag names none); Version: analysis version (ns clock); Model,
LlmCall, InputTokens .. ReasoningTokens, TtftNs: what a model call reports (``analysis.model_calls``; tokens only
where the generation is counted, 0 elsewhere; migration 0041)."""

TRACE_SUMMARY_SCHEMA = pa.schema(
    [
        ("Tenant", pa.string()),
        ("Timestamp", pa.timestamp("ns")),
        ("TraceId", pa.string()),
        ("RootSpanId", pa.string()),
        ("RootService", pa.string()),
        ("RootName", pa.string()),
        ("DurationNs", pa.uint64()),
        ("SpanCount", pa.uint32()),
        ("ServiceCount", pa.uint32()),
        ("ErrorCount", pa.uint32()),
        ("HotspotCount", pa.uint32()),
        ("RequestTenant", pa.string()),
        ("Model", pa.string()),
        ("LlmCalls", pa.uint32()),
        ("TtftNs", pa.uint64()),
        ("TpotNs", pa.float64()),
        ("StageNs", pa.map_(pa.string(), pa.uint64())),
        ("AnalysedSpans", pa.uint64()),
        ("Version", pa.uint64()),
        ("InputTokens", pa.uint64()),
        ("OutputTokens", pa.uint64()),
        ("CachedInputTokens", pa.uint64()),
        ("ReasoningTokens", pa.uint64()),
        ("Sampled", pa.bool_()),
        ("Enveloped", pa.bool_()),
        ("ParentlessSpans", pa.uint32()),
        ("ReattachedSpans", pa.uint32()),
        ("OutlivingSpans", pa.uint32()),
        ("ExtendedSpans", pa.uint32()),
        ("ExtendedNs", pa.uint64()),
        ("ImplausibleRoot", pa.bool_()),
        ("ConversationId", pa.string()),
    ]
)
"""Arrow layout of ``hotspan_trace_summary`` rows. Timestamp: the root span's start; DurationNs: the root's
duration (the request's end-to-end latency); StageNs: critical-path ns per stage with time, summing to
DurationNs; TtftNs (null when no LLM call reports one), TpotNs (ns per output token, null when unknown);
AnalysedSpans: the arrived span count the analysis covered (``hotspan_trace_arrivals.Spans``); InputTokens ..
ReasoningTokens: the request's token usage (``analysis.request_summary``; migration 0040); Sampled: the tail-sampling
decision, false when the trace's spans were dropped from ``otel_traces`` (migration 0050); Enveloped .. ImplausibleRoot:
what the request's window rests on (``analysis.request_window.request_quality``: envelope, parentless_spans,
reattached_spans, outliving_spans, extended_spans, extended_ns, implausible_root; migration 0080, whose older rows
read ParentlessSpans 0); ConversationId: the conversation the request is a turn of (``analysis.conversation``,
``''`` for none; migration 0090)."""

RETRACTION_SCHEMA = pa.schema(
    [
        ("Tenant", pa.string()),
        ("Timestamp", pa.timestamp("ns")),
        ("TraceId", pa.string()),
        ("Version", pa.uint64()),
        ("Deleted", pa.uint8()),
    ]
)
"""Arrow layout of a deletion row of ``hotspan_trace_summary_by_time`` (migration 0110): the key of a stored
summary (owner tenant, start, trace ID), the version that supersedes it, ``Deleted`` 1."""


def retractions(rows: pa.Table, stored_starts: Mapping[tuple[str, str], int]) -> pa.Table:
    """The deletion rows (:data:`RETRACTION_SCHEMA`) that new summary ``rows`` (:data:`TRACE_SUMMARY_SCHEMA`) need in
    ``hotspan_trace_summary_by_time``: one at the stored start of each trace of ``stored_starts`` (per (owner tenant,
    trace ID), ns) whose new ``Timestamp`` is elsewhere, with the new row's ``Version``."""
    stored = pl.DataFrame(
        [(tenant, trace_id, start) for (tenant, trace_id), start in stored_starts.items()],
        schema={"Tenant": pl.String, "TraceId": pl.String, "stored_ns": pl.Int64},
        orient="row",
    )
    new = pl.from_arrow(rows.select(["Tenant", "TraceId", "Timestamp", "Version"]))
    assert isinstance(new, pl.DataFrame)
    moved = new.join(stored, on=["Tenant", "TraceId"]).filter(pl.col("Timestamp").cast(pl.Int64) != pl.col("stored_ns"))
    return (
        moved.select(
            "Tenant",
            pl.col("stored_ns").cast(pl.Datetime("ns")).alias("Timestamp"),
            "TraceId",
            "Version",
            pl.lit(1, pl.UInt8).alias("Deleted"),
        )
        .to_arrow()
        .cast(RETRACTION_SCHEMA)
    )


@dataclass(frozen=True)
class AnalysisFilter:
    """Filters of the window reads; ``None`` leaves one open.

    Attributes:
        start_ns, end_ns: window, ns since the Unix epoch, on the request's start (summary reads) or the
            span's start (span reads); both ends included.
        service: summary reads: the request's root service; span reads: the span's service.
        operation: span reads (and the flame graph's trace match): the span name.
        request_tenant: the tenant the request's spans name (``tenant_id``/``tenant.id`` attribute); not the
            owner tenant, which every read takes separately.
        model: summary reads: the request's model (``gen_ai.request.model``).
    """

    start_ns: int | None = None
    end_ns: int | None = None
    service: str | None = None
    operation: str | None = None
    request_tenant: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class ConversationFilter:
    """Which conversations :meth:`AnalysisStore.conversations` lists; ``None`` leaves one open.

    Attributes:
        start_ns, end_ns: a turn starts in this window (ns since the Unix epoch, both ends included).
        search: the conversation ID contains this text (case ignored).
        service: a turn's root service is this one.
        min_duration_ns, max_duration_ns: bounds on the conversation's summed turn durations (ns).
    """

    start_ns: int | None = None
    end_ns: int | None = None
    search: str | None = None
    service: str | None = None
    min_duration_ns: int | None = None
    max_duration_ns: int | None = None


CONVERSATION_COLUMNS = {
    "conversation_id": pl.String,
    "service": pl.String,
    "turns": pl.UInt64,
    "first_start_ns": pl.Int64,
    "last_start_ns": pl.Int64,
    "duration_ns": pl.UInt64,
    "llm_calls": pl.UInt64,
    "input_tokens": pl.UInt64,
    "output_tokens": pl.UInt64,
    "cached_input_tokens": pl.UInt64,
    "errors": pl.UInt64,
    "trace_ids": pl.List(pl.String),
}
"""One row per conversation (:data:`storage.conversation_sql.CONVERSATIONS`)."""

TURN_COLUMNS = {
    "trace_id": pl.String,
    "service": pl.String,
    "root_name": pl.String,
    "start_ns": pl.Int64,
    "duration_ns": pl.UInt64,
    "model": pl.String,
    "llm_calls": pl.UInt32,
    "input_tokens": pl.UInt64,
    "output_tokens": pl.UInt64,
    "cached_input_tokens": pl.UInt64,
    "errors": pl.UInt32,
    "sampled": pl.Boolean,
}
"""One row per turn (:data:`storage.conversation_sql.TURNS`), before the stage columns."""


@dataclass(frozen=True)
class PendingTrace:
    """A trace due for analysis: its owner tenant, ID, last arrival (ms since the epoch, ClickHouse's clock),
    arrived span count, and the start of its stored summary (ns since the epoch; None when never summarised)."""

    tenant: str
    trace_id: str
    last_arrival_ms: int
    arrived_spans: int
    summary_start_ns: int | None


class AnalysisStore(Protocol):
    """The pipeline's side of its tables and the window reads the API, UI and diagnosis use.

    Contract: thread-safe; reads return empty frames (with their columns), never ``None``; writes are one
    INSERT each, durable on return, idempotent per ``Version`` (rewriting a trace with a higher version
    supersedes it). Raises what the ClickHouse client raises when storage fails.
    """

    def clock_ms(self) -> int:
        """The storage clock, ms since the epoch (the clock arrivals are stamped with)."""
        ...

    def pending_traces(
        self,
        *,
        cutoff_ms: int,
        since_ms: int,
        limit: int,
        skipped: Sequence[str] = (),
        shard: int = 0,
        shards: int = 1,
    ) -> list[PendingTrace]:
        """Traces whose last span arrived after ``since_ms`` and at or before ``cutoff_ms`` and whose arrived
        span count differs from their summary's (new, or late spans), oldest arrival first, at most
        ``limit``; every owner tenant. ``skipped`` trace IDs are left out; ``shard`` of ``shards`` splits the
        traces between pipeline instances by a hash of the trace ID."""
        ...

    def summarised(self, owner: str, trace_ids: Sequence[str]) -> dict[str, bool]:
        """Of ``trace_ids`` of owner tenant ``owner``, those that already have a summary, each with its stored
        tail-sampling decision (True: kept; ``Sampled``)."""
        ...

    def drop_traces(self, owner: str, trace_ids: Sequence[str], start_ns: int, end_ns: int) -> None:
        """Delete the raw spans of ``trace_ids`` of owner tenant ``owner`` starting in ``[start_ns, end_ns]`` (ns since
        the epoch; the caller's bound on where they lie) from ``otel_traces``, and their lookup rows: what tail
        sampling does to a dropped trace. Derived tables keep what they counted, but the dependency rollup's minutes
        there are marked stale (the dependencies count stored spans). Durable on return; deleting again is a no-op."""
        ...

    def refresh_summaries(self, owner: str, arrived: Mapping[str, int], version: int) -> None:
        """Rewrite the stored summaries of the traces in ``arrived`` (trace ID → arrived span count) with that count
        as ``AnalysedSpans`` and ``version``, nothing else changed; traces without a summary are left alone."""
        ...

    def duration_quantiles(
        self, services: Sequence[str], start_ns: int, end_ns: int, quantile: float, min_samples: int, *, tenant: str
    ) -> pl.DataFrame:
        """Per (service, operation) of ``services`` with at least ``min_samples`` spans starting in
        ``[start_ns, end_ns]``, the ``quantile`` of their duration: service_name, name (String), threshold_ns
        (Float64 ns), samples (UInt64)."""
        ...

    def write_span_analysis(self, rows: pa.Table) -> None:
        """Store per-span rows (:data:`SPAN_ANALYSIS_SCHEMA`)."""
        ...

    def write_trace_summaries(self, rows: pa.Table, stored_starts: Mapping[tuple[str, str], int]) -> None:
        """Store per-trace rows (:data:`TRACE_SUMMARY_SCHEMA`), each a new version of its trace's summary.

        Args:
            stored_starts: per (owner tenant, trace ID) of ``rows`` summarised before, the start of its stored
                summary (ns; :attr:`PendingTrace.summary_start_ns`). The window reads count each trace once, at its
                latest start, only if every trace whose stored summary started elsewhere is named here.
        """
        ...

    def stage_percentiles(self, where: AnalysisFilter, group_by: GroupBy, *, tenant: str | None) -> pl.DataFrame:
        """Per group and stage: group (String), stage (String, in ``stages`` order), requests (UInt64),
        p50_ns, p95_ns, p99_ns, mean_ns (Float64 ns of the stage per request, 0 where absent), share_of_e2e
        (Float64 in [0, 1], null for zero latency). Sorted by group, then stage order."""
        ...

    def latency_percentiles(self, where: AnalysisFilter, group_by: GroupBy, *, tenant: str | None) -> pl.DataFrame:
        """Per group: group, requests, then for each metric ``e2e``, ``ttft``, ``tpot``: ``<m>_requests``
        (requests reporting it), ``<m>_p50_ns``, ``<m>_p95_ns``, ``<m>_p99_ns``, ``<m>_mean_ns`` (Float64 ns,
        TPOT in ns per output token; null when no request reports it)."""
        ...

    def window_quality(self, where: AnalysisFilter, group_by: GroupBy, *, tenant: str | None) -> pl.DataFrame:
        """Per group: group (String), requests, unrecorded, enveloped, attached, outliving, implausible_root,
        reattached (UInt64 request counts: :data:`storage.analysis_sql.WINDOW_QUALITY`). Sorted by group."""
        ...

    def quality_examples(self, where: AnalysisFilter, limit: int, *, tenant: str | None) -> pl.DataFrame:
        """Up to ``limit`` requests per repair, longest first: repair (String: enveloped, attached, outliving,
        implausible_root), trace_id (String), duration_ns (UInt64). Sorted by repair."""
        ...

    def stage_shares_over_time(self, where: AnalysisFilter, bucket_ns: int, *, tenant: str | None) -> pl.DataFrame:
        """Per time bucket and stage: bucket_start_ns (Int64), stage, requests, stage_ns, e2e_ns (UInt64 ns),
        share_of_e2e (Float64). Sorted by bucket, then stage order."""
        ...

    def hotspot_ranking(
        self, where: AnalysisFilter, order: RankingOrder, limit: int, *, tenant: str | None
    ) -> pl.DataFrame:
        """(service, operation) ranked by ``order``: service_name, name, spans, self_total_ns, self_p95_ns,
        self_mean_ns, duration_total_ns, hotspot_spans, self_share, p95_share (see
        :data:`storage.analysis_sql.HOTSPOT_RANKING`)."""
        ...

    def flagged_spans(self, where: AnalysisFilter, limit: int, *, tenant: str | None) -> pl.DataFrame:
        """Flagged spans, longest first: trace_id, span_id, service_name, name, stage, start_time_unix_nano,
        duration_ns, self_time_ns, reason, threshold_ms."""
        ...

    def flame_nodes(self, where: AnalysisFilter, *, tenant: str | None) -> pl.DataFrame:
        """Aggregated flame-graph nodes of the requests matching ``where`` (window, request tenant and model on
        the request; service and operation: the request has such a span): node, parent (UInt64 path hashes,
        parent 0 at the top), depth, service_name, name, self_ns, count, traces (the matched request count,
        the same on every row)."""
        ...

    def trace_summaries(self, where: AnalysisFilter, limit: int, *, tenant: str | None) -> pl.DataFrame:
        """Request summaries, newest first: the columns of ``analysis.request_summary`` (tenant = the request
        tenant; token counts included) plus hotspot_count, analysed_spans, version, sampled (Boolean: False when
        tail sampling dropped the trace's spans, so it cannot be opened), the data-quality columns of
        ``analysis.request_window.request_quality`` but the root's durations (envelope as ``enveloped``; all 0 or
        false in rows older than migration 0080) and one ``<stage>_ns`` column per stage of ``analysis.STAGES``
        (UInt64 ns, 0 where absent), like ``analysis.stage_breakdown_wide``."""
        ...

    def span_rows(self, where: AnalysisFilter, limit: int, *, tenant: str | None) -> pl.DataFrame:
        """Analysed spans, newest first (columns in :data:`storage.analysis_sql.SPAN_ROWS`)."""
        ...

    def trace_usage(self, trace_ids: Sequence[str], *, tenant: str | None, stage: str = "") -> pl.DataFrame:
        """Per analysed trace among ``trace_ids`` and model its calls used: trace_id, llm_calls, input_tokens,
        output_tokens, cached_input_tokens, reasoning_tokens (the trace's totals, UInt64), dominant_stage
        (String), stage_ns (UInt64: the critical-path ns of ``stage``, an ``analysis.STAGES`` name; 0 for ``""``),
        model (String, null when the trace has no model usage), model_input_tokens,
        model_output_tokens, model_cached_input_tokens (UInt64, the model's part; null likewise). Traces not
        analysed yet are absent."""
        ...

    def conversations(
        self, where: ConversationFilter, order: ConversationOrder, limit: int, *, tenant: str | None
    ) -> pl.DataFrame:
        """The conversations ``where`` matches, at most ``limit``, sorted by ``order`` (descending), each with every
        analysed turn it has: :data:`CONVERSATION_COLUMNS`."""
        ...

    def conversation_turns(self, conversation_id: str, limit: int, *, tenant: str | None) -> pl.DataFrame:
        """The analysed turns of one conversation in time order, at most ``limit``: :data:`TURN_COLUMNS`, then one
        ``<stage>_ns`` column per stage (UInt64 critical-path ns, 0 where absent). Empty for an unknown ID."""
        ...

    def token_usage(self, where: AnalysisFilter, group_by: GroupBy, *, tenant: str | None) -> pl.DataFrame:
        """Per group (root service, model of the calls, request tenant, or one group) and model: group, model
        (String), requests, llm_calls, input_tokens, output_tokens, cached_input_tokens, reasoning_tokens
        (UInt64), over the window's analysed requests (summary filters). Sorted by group, model."""
        ...


class ClickHouseAnalysisStore:
    """:class:`AnalysisStore` on ClickHouse.

    Args:
        ch: the database handle.
        stages: stage names in display order (``analysis.STAGES``); the aggregates list stages in this order.
    """

    def __init__(self, ch: ClickHouse, stages: Sequence[str]) -> None:
        self._ch = ch
        self._stages = list(stages)

    # --- the pipeline's side ---------------------------------------------------------------------------------

    def clock_ms(self) -> int:
        return int(self._ch.query_rows(analysis_sql.NOW_MS)[0][0])

    def pending_traces(
        self,
        *,
        cutoff_ms: int,
        since_ms: int,
        limit: int,
        skipped: Sequence[str] = (),
        shard: int = 0,
        shards: int = 1,
    ) -> list[PendingTrace]:
        parameters = {
            "cutoff_ms": cutoff_ms,
            "since_ms": since_ms,
            "limit": limit,
            "skipped": list(skipped),
            "shard": shard,
            "shards": shards,
        }
        rows = self._ch.query_rows(analysis_sql.PENDING_TRACES, parameters)
        return [
            PendingTrace(row[0], row[1], int(row[2]), int(row[3]), None if row[4] is None else int(row[4]))
            for row in rows
        ]

    def summarised(self, owner: str, trace_ids: Sequence[str]) -> dict[str, bool]:
        rows = self._ch.query_rows(analysis_sql.SUMMARISED, {"owner": owner, "trace_ids": list(trace_ids)})
        return {row[0]: bool(row[1]) for row in rows}

    def drop_traces(self, owner: str, trace_ids: Sequence[str], start_ns: int, end_ns: int) -> None:
        if not trace_ids:
            return
        parameters = {"owner": owner, "trace_ids": list(trace_ids), "start_ns": start_ns, "end_ns": end_ns}
        layout = self._ch.layout
        self._ch.command(mutation_statement(analysis_sql.DELETE_TRACE_SPANS, layout), parameters)
        self._ch.command(mutation_statement(analysis_sql.DELETE_TRACE_INDEX, layout), {"trace_ids": list(trace_ids)})
        dependency_rollup.uncover(self._ch, start_ns, end_ns)

    def refresh_summaries(self, owner: str, arrived: Mapping[str, int], version: int) -> None:
        if not arrived:
            return
        parameters = {"owner": owner, "trace_ids": list(arrived), "arrived": list(arrived.values()), "version": version}
        self._ch.command(analysis_sql.REFRESH_SUMMARIES, parameters)

    def duration_quantiles(
        self, services: Sequence[str], start_ns: int, end_ns: int, quantile: float, min_samples: int, *, tenant: str
    ) -> pl.DataFrame:
        parameters = {
            "services": list(services),
            "start_ns": start_ns,
            "end_ns": end_ns,
            "quantile": quantile,
            "min_samples": min_samples,
            **tenant_parameters(tenant),
        }
        frame = self._frame(analysis_sql.DURATION_QUANTILES, parameters)
        schema = {"service_name": pl.String, "name": pl.String, "threshold_ns": pl.Float64, "samples": pl.UInt64}
        return _typed(frame, schema)

    def write_span_analysis(self, rows: pa.Table) -> None:
        self._insert("hotspan_span_analysis", rows, SPAN_ANALYSIS_SCHEMA)

    def write_trace_summaries(self, rows: pa.Table, stored_starts: Mapping[tuple[str, str], int]) -> None:
        # The copy sorted by time (migration 0110) keys a row by its start, so a version starting elsewhere than the
        # stored one first retracts it there. First: should the summaries' insert then fail, the trace's stored
        # AnalysedSpans is unchanged, so it is analysed, retracted and written again; a window misses it meanwhile
        # and never counts it twice.
        self._insert("hotspan_trace_summary_by_time", retractions(rows, stored_starts), RETRACTION_SCHEMA)
        self._insert("hotspan_trace_summary", rows, TRACE_SUMMARY_SCHEMA)

    # --- window reads ----------------------------------------------------------------------------------------

    def stage_percentiles(self, where: AnalysisFilter, group_by: GroupBy, *, tenant: str | None) -> pl.DataFrame:
        conditions, parameters = _conditions(where, analysis_sql.SUMMARY_FILTERS, tenant)
        sql = analysis_sql.STAGE_PERCENTILES.format(group=analysis_sql.GROUP_COLUMNS[group_by], conditions=conditions)
        frame = self._frame(sql, parameters | {"stages": self._stages})
        schema = {
            "group": pl.String,
            "stage": pl.String,
            "requests": pl.UInt64,
            "p50_ns": pl.Float64,
            "p95_ns": pl.Float64,
            "p99_ns": pl.Float64,
            "mean_ns": pl.Float64,
            "share_of_e2e": pl.Float64,
        }
        if not frame.height:
            return pl.DataFrame(schema=schema)
        return frame.rename({"group_key": "group"}).select(list(schema)).cast(schema)

    def latency_percentiles(self, where: AnalysisFilter, group_by: GroupBy, *, tenant: str | None) -> pl.DataFrame:
        conditions, parameters = _conditions(where, analysis_sql.SUMMARY_FILTERS, tenant)
        sql = analysis_sql.LATENCY_PERCENTILES.format(group=analysis_sql.GROUP_COLUMNS[group_by], conditions=conditions)
        frame = self._frame(sql, parameters)
        metrics = ("e2e", "ttft", "tpot")
        schema = {"group": pl.String, "requests": pl.UInt64} | {
            f"{metric}_{part}": pl.UInt64 if part == "requests" else pl.Float64
            for metric in metrics
            for part in ("requests", "p50_ns", "p95_ns", "p99_ns", "mean_ns")
        }
        if not frame.height:
            return pl.DataFrame(schema=schema)
        frame = frame.rename({"group_key": "group"}).with_columns(pl.col("requests").alias("e2e_requests"))
        columns = []
        for metric in metrics:
            # A metric no request of the group reports reads null, not ClickHouse's nan or zero.
            reported = pl.col(f"{metric}_requests") > 0
            columns += [
                pl.when(reported).then(pl.col(metric).list.get(i)).alias(f"{metric}_{name}")
                for i, name in enumerate(("p50_ns", "p95_ns", "p99_ns"))
            ]
            columns.append(pl.when(reported).then(pl.col(f"{metric}_mean_ns")).alias(f"{metric}_mean_ns"))
        return frame.with_columns(columns).select(list(schema)).cast(schema)

    def window_quality(self, where: AnalysisFilter, group_by: GroupBy, *, tenant: str | None) -> pl.DataFrame:
        conditions, parameters = _conditions(where, analysis_sql.SUMMARY_FILTERS, tenant)
        sql = analysis_sql.WINDOW_QUALITY.format(group=analysis_sql.GROUP_COLUMNS[group_by], conditions=conditions)
        frame = self._frame(sql, parameters)
        counts = ("requests", "unrecorded", "enveloped", "attached", "outliving", "implausible_root", "reattached")
        schema = {"group": pl.String} | dict.fromkeys(counts, pl.UInt64)
        return _typed(frame.rename({"group_key": "group"}) if frame.height else frame, schema)

    def quality_examples(self, where: AnalysisFilter, limit: int, *, tenant: str | None) -> pl.DataFrame:
        conditions, parameters = _conditions(where, analysis_sql.SUMMARY_FILTERS, tenant)
        frame = self._frame(analysis_sql.QUALITY_EXAMPLES.format(conditions=conditions), parameters | {"limit": limit})
        return _typed(frame, {"repair": pl.String, "trace_id": pl.String, "duration_ns": pl.UInt64})

    def stage_shares_over_time(self, where: AnalysisFilter, bucket_ns: int, *, tenant: str | None) -> pl.DataFrame:
        conditions, parameters = _conditions(where, analysis_sql.SUMMARY_FILTERS, tenant)
        sql = analysis_sql.STAGE_SHARES_OVER_TIME.format(conditions=conditions)
        frame = self._frame(sql, parameters | {"stages": self._stages, "bucket_ns": bucket_ns})
        schema = {
            "bucket_start_ns": pl.Int64,
            "stage": pl.String,
            "requests": pl.UInt64,
            "stage_ns": pl.UInt64,
            "e2e_ns": pl.UInt64,
            "share_of_e2e": pl.Float64,
        }
        return _typed(frame, schema)

    def hotspot_ranking(
        self, where: AnalysisFilter, order: RankingOrder, limit: int, *, tenant: str | None
    ) -> pl.DataFrame:
        conditions, parameters = _conditions(where, analysis_sql.SPAN_FILTERS, tenant)
        sql = analysis_sql.HOTSPOT_RANKING.format(conditions=conditions, order=analysis_sql.RANKING_ORDERS[order])
        frame = self._frame(sql, parameters | {"limit": limit})
        schema = {
            "service_name": pl.String,
            "name": pl.String,
            "spans": pl.UInt64,
            "self_total_ns": pl.UInt64,
            "self_p95_ns": pl.Float64,
            "self_mean_ns": pl.Float64,
            "duration_total_ns": pl.UInt64,
            "hotspot_spans": pl.UInt64,
            "self_share": pl.Float64,
            "p95_share": pl.Float64,
        }
        return _typed(frame, schema)

    def flagged_spans(self, where: AnalysisFilter, limit: int, *, tenant: str | None) -> pl.DataFrame:
        conditions, parameters = _conditions(where, analysis_sql.SPAN_FILTERS, tenant)
        frame = self._frame(analysis_sql.FLAGGED_SPANS.format(conditions=conditions), parameters | {"limit": limit})
        schema = {
            "trace_id": pl.String,
            "span_id": pl.String,
            "service_name": pl.String,
            "name": pl.String,
            "stage": pl.String,
            "start_time_unix_nano": pl.Int64,
            "duration_ns": pl.UInt64,
            "self_time_ns": pl.UInt64,
            "reason": pl.String,
            "threshold_ms": pl.Float64,
        }
        return _typed(frame, schema)

    def flame_nodes(self, where: AnalysisFilter, *, tenant: str | None) -> pl.DataFrame:
        summary_where = AnalysisFilter(where.start_ns, where.end_ns, None, None, where.request_tenant, where.model)
        conditions, parameters = _conditions(summary_where, analysis_sql.SUMMARY_FILTERS, tenant)
        span_where = AnalysisFilter(service=where.service, operation=where.operation)
        span_conditions, span_parameters = _conditions(span_where, analysis_sql.SPAN_FILTERS, tenant)
        if where.service is not None or where.operation is not None:
            # The span conditions are fixed fragments (their values travel as parameters), so nesting is safe.
            match = analysis_sql.SPAN_MATCH.format(owner=analysis_sql.OWNER_FILTER, span_conditions=span_conditions)
            conditions = f"{conditions} AND {match}"
            parameters |= span_parameters
        sql = analysis_sql.FLAME_NODES.format(conditions=conditions, owner=analysis_sql.OWNER_FILTER)
        frame = self._frame(sql, parameters)
        schema = FLAME_NODE_COLUMNS | {"traces": pl.UInt64}
        return _typed(frame, schema)

    def trace_summaries(self, where: AnalysisFilter, limit: int, *, tenant: str | None) -> pl.DataFrame:
        conditions, parameters = _conditions(where, analysis_sql.SUMMARY_FILTERS, tenant)
        sql = analysis_sql.TRACE_SUMMARIES.format(conditions=conditions)
        frame = self._frame(sql, parameters | {"stages": self._stages, "limit": limit})
        stage_columns = [f"{stage}_ns" for stage in self._stages]
        schema = {
            "trace_id": pl.String,
            "root_span_id": pl.String,
            "root_service": pl.String,
            "root_name": pl.String,
            "start_time_unix_nano": pl.Int64,
            "duration_ns": pl.Int64,
            "span_count": pl.UInt32,
            "service_count": pl.UInt32,
            "error_count": pl.UInt32,
            "hotspot_count": pl.UInt32,
            "tenant": pl.String,
            "model": pl.String,
            "llm_calls": pl.UInt32,
            "ttft_ns": pl.Int64,
            "tpot_ns": pl.Float64,
            "analysed_spans": pl.UInt64,
            "version": pl.UInt64,
            "input_tokens": pl.UInt64,
            "output_tokens": pl.UInt64,
            "cached_input_tokens": pl.UInt64,
            "reasoning_tokens": pl.UInt64,
            "sampled": pl.Boolean,
            "enveloped": pl.Boolean,
            "parentless_spans": pl.UInt32,
            "reattached_spans": pl.UInt32,
            "outliving_spans": pl.UInt32,
            "extended_spans": pl.UInt32,
            "extended_ns": pl.UInt64,
            "implausible_root": pl.Boolean,
        } | dict.fromkeys(stage_columns, pl.UInt64)
        if not frame.height:
            return pl.DataFrame(schema=schema)
        stages = frame.select(pl.col("stage_ns").list.get(i).alias(column) for i, column in enumerate(stage_columns))
        # Empty strings are how the table stores "none"; the analysis frames say null.
        named = [pl.col(name).replace("", None).alias(name) for name in ("tenant", "model")]
        return (
            pl.concat([frame.drop("stage_ns").with_columns(named), stages], how="horizontal")
            .select(list(schema))
            .cast(schema)
        )

    def span_rows(self, where: AnalysisFilter, limit: int, *, tenant: str | None) -> pl.DataFrame:
        conditions, parameters = _conditions(where, analysis_sql.SPAN_FILTERS, tenant)
        return self._frame(analysis_sql.SPAN_ROWS.format(conditions=conditions), parameters | {"limit": limit})

    def trace_usage(self, trace_ids: Sequence[str], *, tenant: str | None, stage: str = "") -> pl.DataFrame:
        parameters = {"trace_ids": list(trace_ids), "stage": stage, **tenant_parameters(tenant)}
        frame = self._frame(analysis_sql.TRACE_USAGE, parameters)
        tokens = ("input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens")
        model_tokens = ("model_input_tokens", "model_output_tokens", "model_cached_input_tokens")
        schema = (
            {"trace_id": pl.String, "llm_calls": pl.UInt64}
            | dict.fromkeys(tokens, pl.UInt64)
            | {"dominant_stage": pl.String, "stage_ns": pl.UInt64, "model": pl.String}
            | dict.fromkeys(model_tokens, pl.UInt64)
        )
        return _typed(frame, schema)

    def token_usage(self, where: AnalysisFilter, group_by: GroupBy, *, tenant: str | None) -> pl.DataFrame:
        conditions, parameters = _conditions(where, analysis_sql.SUMMARY_FILTERS, tenant)
        summarised = f"TraceId IN (SELECT TraceId FROM hotspan_trace_summary_by_time FINAL WHERE {conditions})"
        model_usage = analysis_sql.MODEL_USAGE.format(owner=analysis_sql.OWNER_FILTER, traces=summarised)
        sql = analysis_sql.TOKEN_USAGE.format(
            group=analysis_sql.USAGE_GROUP_COLUMNS[group_by], model_usage=model_usage, conditions=conditions
        )
        frame = self._frame(sql, parameters)
        schema = {"group": pl.String, "model": pl.String} | dict.fromkeys(
            ("requests", "llm_calls", "input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens"),
            pl.UInt64,
        )
        return _typed(frame.rename({"group_key": "group"}) if frame.height else frame, schema)

    def conversations(
        self, where: ConversationFilter, order: ConversationOrder, limit: int, *, tenant: str | None
    ) -> pl.DataFrame:
        parameters: dict[str, object] = dict(tenant_parameters(tenant)) | {"limit": limit}
        match, totals = ["1"], ["1"]
        for field in fields(where):
            value = getattr(where, field.name)
            if value is None:
                continue
            for filters, conditions in (
                (conversation_sql.MATCH_FILTERS, match),
                (conversation_sql.TOTAL_FILTERS, totals),
            ):
                if field.name in filters:
                    conditions.append(filters[field.name])
                    parameters[field.name] = value
        sql = conversation_sql.CONVERSATIONS.format(
            owner=analysis_sql.OWNER_FILTER,
            match=" AND ".join(match),
            totals=" AND ".join(totals),
            order=conversation_sql.ORDER_COLUMNS[order],
        )
        return _typed(self._frame(sql, parameters), CONVERSATION_COLUMNS)

    def conversation_turns(self, conversation_id: str, limit: int, *, tenant: str | None) -> pl.DataFrame:
        parameters = {"conversation_id": conversation_id, "stages": self._stages, "limit": limit}
        frame = self._frame(conversation_sql.TURNS, parameters | tenant_parameters(tenant))
        stage_columns = {f"{stage}_ns": pl.UInt64 for stage in self._stages}
        if not frame.height:
            return pl.DataFrame(schema=TURN_COLUMNS | stage_columns)
        stages = frame.select(pl.col("stage_ns").list.get(i).alias(name) for i, name in enumerate(stage_columns))
        return pl.concat([_typed(frame, TURN_COLUMNS), stages.cast(stage_columns)], how="horizontal")

    # --- helpers ---------------------------------------------------------------------------------------------

    def _frame(self, sql: str, parameters: dict[str, object]) -> pl.DataFrame:
        frame = pl.from_arrow(self._ch.query_arrow(sql, parameters))
        assert isinstance(frame, pl.DataFrame)
        return frame

    def _insert(self, table: str, rows: pa.Table, schema: pa.Schema) -> None:
        if rows.num_rows == 0:
            return
        if not rows.schema.equals(schema):
            raise ValueError(f"rows for {table} do not have its layout: {rows.schema}")
        for part in split_by_day(rows, "Timestamp", self._ch.partition_limit):
            self._ch.insert_arrow(table, part)


def _conditions(where: AnalysisFilter, filters: dict[str, str], tenant: str | None) -> tuple[str, dict[str, object]]:
    """The owner-tenant condition and every filter of ``filters`` whose field in ``where`` is set, joined by
    AND, with their parameters."""
    conditions = [analysis_sql.OWNER_FILTER]
    parameters: dict[str, object] = dict(tenant_parameters(tenant))
    for field in fields(where):
        value = getattr(where, field.name)
        if value is not None and field.name in filters:
            conditions.append(filters[field.name])
            parameters[field.name] = value
    return " AND ".join(conditions), parameters


def _typed(frame: pl.DataFrame, schema: dict[str, pl.DataType | type[pl.DataType]]) -> pl.DataFrame:
    """``frame``'s ``schema`` columns, in that order and cast to those types; with no rows, an empty frame with
    those columns (ClickHouse may answer an empty result without any)."""
    return frame.select(list(schema)).cast(schema) if frame.height else pl.DataFrame(schema=schema)
