"""SQL for the trace pipeline's tables (``hotspan_trace_arrivals``, ``hotspan_span_analysis``,
``hotspan_trace_summary``, migrations 0010-0015) and the window aggregates read from them, in one place.

The summaries are stored twice: ``hotspan_trace_summary`` sorted by trace, for the reads of given traces, and
``hotspan_trace_summary_by_time`` sorted by start (migrations 0110-0112), for the reads of a window of requests,
which then read the window's granules only.

Every value is a bound ``{name:Type}`` parameter. Templates with ``{conditions}``/``{group}``/``{order}``
fields are filled by :mod:`storage.analysis_store` with ``str.format``, and only ever with the fixed SQL
fragments defined here (conditions whose parameters are set, a whitelisted column): never with user text.

Every read is limited to one owner tenant (``storage.tenancy``) or, for an admin, to all of them:
:data:`OWNER_FILTER` on the derived tables (they store folded tenant names, never ``''``) and
:data:`storage.trace_sql.TENANT_FILTER` on ``otel_traces``.
"""

from __future__ import annotations

from storage.tenancy import tenant_condition
from storage.trace_sql import IDENTITY, SPAN_COLUMNS, TENANT, TENANT_FILTER, TRACES_WHERE

OWNER_FILTER = tenant_condition()
"""The owner-tenant condition of every read of a derived table; parameters from
:func:`storage.tenancy.tenant_parameters`."""

NOW_MS = "SELECT toUnixTimestamp64Milli(now64(3))"
"""The ClickHouse server's clock (ms since the epoch): the clock ``hotspan_trace_arrivals.LastArrival`` is
stamped with, so idleness is judged without clock skew between Hotspan and ClickHouse."""

PENDING_TRACES = """
WITH recent AS (
    SELECT DISTINCT Tenant, TraceId
    FROM hotspan_trace_arrivals
    WHERE LastArrival > fromUnixTimestamp64Milli({since_ms:Int64})
      AND cityHash64(TraceId) % {shards:UInt32} = {shard:UInt32}
      AND TraceId NOT IN {skipped:Array(String)}
),
arrived AS (
    SELECT Tenant, TraceId, toUnixTimestamp64Milli(max(LastArrival)) AS last_arrival_ms, sum(Spans) AS arrived_spans
    FROM hotspan_trace_arrivals
    WHERE (Tenant, TraceId) IN recent
    GROUP BY Tenant, TraceId
    HAVING last_arrival_ms <= {cutoff_ms:Int64}
),
stored AS (
    SELECT Tenant, TraceId, AnalysedSpans, toUnixTimestamp64Nano(Timestamp) AS start_ns
    FROM hotspan_trace_summary FINAL
    WHERE (Tenant, TraceId) IN recent
)
SELECT
    arrived.Tenant AS tenant,
    arrived.TraceId AS trace_id,
    last_arrival_ms,
    arrived_spans,
    if(stored.TraceId = '', NULL, stored.start_ns) AS summary_start_ns
FROM arrived
LEFT JOIN stored ON stored.Tenant = arrived.Tenant AND stored.TraceId = arrived.TraceId
WHERE stored.TraceId = '' OR stored.AnalysedSpans != arrived_spans
ORDER BY last_arrival_ms, tenant, trace_id
LIMIT {limit:UInt32}
SETTINGS join_use_nulls = 0
"""
"""Traces due for analysis: some span arrived after ``since_ms`` (the caller's watermark, 0 for all), the last
one at or before ``cutoff_ms`` (quiet long enough), and the arrived span count differs from the one the stored
summary covers (never analysed, or late spans since), with the stored summary's start (ns; null for none: a trace
without one joins empty values, whatever a server's profile sets ``join_use_nulls`` to). Oldest
first. ``shard``/``shards`` split the work between pipeline instances by trace ID (``0``/``1``: one instance does
all); ``skipped`` trace IDs are left out."""

SUMMARISED = """
SELECT TraceId, argMax(Sampled, Version)
FROM hotspan_trace_summary
WHERE Tenant = {owner:String} AND TraceId IN {trace_ids:Array(String)}
GROUP BY TraceId
"""
"""Which of ``trace_ids`` (of owner tenant ``owner``) already have a summary, and its latest version's tail-sampling
decision (``Sampled``, migration 0050)."""

DELETE_TRACE_SPANS = f"""
DELETE FROM otel_traces
WHERE {TENANT} = {{owner:String}}
  AND TraceId IN {{trace_ids:Array(String)}}
  AND Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}})
  AND Timestamp <= fromUnixTimestamp64Nano({{end_ns:Int64}})
"""
"""Remove the raw spans of ``trace_ids`` of owner tenant ``owner`` starting in ``[start_ns, end_ns]`` (a lightweight
delete: rows are masked at once and purged by later merges; the time bounds let ClickHouse skip the partitions and
granules that cannot hold them, the trace-ID bloom filter the rest). Rollups fed at insert keep what they counted."""

DELETE_TRACE_INDEX = """
DELETE FROM otel_traces_trace_id_ts
WHERE TraceId IN {trace_ids:Array(String)}
  AND TraceId NOT IN (SELECT TraceId FROM otel_traces WHERE TraceId IN {trace_ids:Array(String)})
"""
"""Remove the trace-ID lookup rows of ``trace_ids`` no tenant has spans of any more (the lookup table has no
tenant column, so a trace ID another tenant still uses keeps its row)."""

REFRESH_SUMMARIES = """
INSERT INTO hotspan_trace_summary
SELECT * REPLACE (
    {arrived:Array(UInt64)}[indexOf({trace_ids:Array(String)}, TraceId)] AS AnalysedSpans,
    {version:UInt64} AS Version,
    now64(3) AS AnalysedAt
)
FROM hotspan_trace_summary FINAL
WHERE Tenant = {owner:String} AND TraceId IN {trace_ids:Array(String)}
"""
"""Rewrite the stored summaries of ``trace_ids`` (owner ``owner``) unchanged but for ``AnalysedSpans`` (the arrived
count at the same position of ``arrived``) and ``Version``: records that late spans were handled without analysing
the trace again (they followed a drop decision)."""

TRACES_SPANS = f"""
SELECT{SPAN_COLUMNS},
    {TENANT} AS tenant
FROM otel_traces
WHERE {TRACES_WHERE}
ORDER BY trace_id, start_time_unix_nano, span_id, kind, name, Version DESC
LIMIT 1 BY {IDENTITY}
"""
"""Every span of many traces, each once, with ``tenant`` (the owner tenant, folded) after the columns of
``TraceReader.trace``: the trace pipeline's read of each batch of traces it analyses. One scan, as
``storage.trace_sql.TRACE_SPANS``: the copies of a span sort together, its latest ``Version`` first, and
``LIMIT 1 BY`` keeps that one. The trace-ID lookup table bounds the scan to the partitions and key ranges holding
those traces (``storage.trace_sql.in_time_range_of``, as every read of one trace by its ID)."""

DURATION_QUANTILES = f"""
SELECT
    ServiceName AS service_name,
    SpanName AS name,
    quantile({{quantile:Float64}})(Duration) AS threshold_ns,
    count() AS samples
FROM (
    SELECT ServiceName, SpanName, argMax(Duration, Version) AS Duration
    FROM otel_traces
    WHERE ServiceName IN {{services:Array(String)}}
      AND Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}})
      AND Timestamp <= fromUnixTimestamp64Nano({{end_ns:Int64}})
      AND {TENANT_FILTER}
    GROUP BY {IDENTITY}, ServiceName
)
GROUP BY service_name, name
HAVING samples >= {{min_samples:UInt64}}
"""
"""The rolling hotspot threshold: per (service, operation) of ``services``, the ``quantile`` of span duration
(ns; ClickHouse's sampling ``quantile``, exact below 8192 spans) over spans starting in the window, for
operations with at least ``min_samples`` spans there; each span counted once."""

SUMMARY_FILTERS = {
    "start_ns": "Timestamp >= fromUnixTimestamp64Nano({start_ns:Int64})",
    "end_ns": "Timestamp <= fromUnixTimestamp64Nano({end_ns:Int64})",
    "service": "RootService = {service:String}",
    "request_tenant": "RequestTenant = {request_tenant:String}",
    "model": "Model = {model:String}",
}
"""Conditions on ``hotspan_trace_summary`` by parameter name (window on the request's start, its root service,
the tenant and model its spans name); only those whose parameter is set apply."""

SPAN_FILTERS = {
    "start_ns": "Timestamp >= fromUnixTimestamp64Nano({start_ns:Int64})",
    "end_ns": "Timestamp <= fromUnixTimestamp64Nano({end_ns:Int64})",
    "service": "ServiceName = {service:String}",
    "operation": "SpanName = {operation:String}",
    "request_tenant": "RequestTenant = {request_tenant:String}",
}
"""Conditions on ``hotspan_span_analysis`` by parameter name (window on the span's start)."""

GROUP_COLUMNS = {"service": "RootService", "model": "Model", "tenant": "RequestTenant", "": "''"}
"""Grouping of the window aggregates: by the request's root service, model, the tenant its spans name, or
none."""

STAGE_PERCENTILES = """
SELECT
    {group} AS group_key,
    Stage AS stage,
    count() AS requests,
    quantilesExactInclusive(0.5, 0.95, 0.99)(StageNs[Stage]) AS q,
    q[1] AS p50_ns,
    q[2] AS p95_ns,
    q[3] AS p99_ns,
    avg(StageNs[Stage]) AS mean_ns,
    if(sum(DurationNs) > 0, sum(StageNs[Stage]) / sum(DurationNs), NULL) AS share_of_e2e
FROM hotspan_trace_summary_by_time FINAL
ARRAY JOIN {{stages:Array(String)}} AS Stage
WHERE {conditions}
GROUP BY group_key, stage
ORDER BY group_key, indexOf({{stages:Array(String)}}, stage)
"""
"""Per group and stage over the window's requests: p50/p95/p99 and mean of the stage's critical-path time per
request (ns; a request without the stage counts 0; exact, linearly interpolated like numpy's default) and the
stage's share of the group's summed end-to-end latency."""

LATENCY_PERCENTILES = """
SELECT
    {group} AS group_key,
    count() AS requests,
    quantilesExactInclusive(0.5, 0.95, 0.99)(DurationNs) AS e2e,
    avg(DurationNs) AS e2e_mean_ns,
    count(TtftNs) AS ttft_requests,
    quantilesExactInclusive(0.5, 0.95, 0.99)(TtftNs) AS ttft,
    avg(TtftNs) AS ttft_mean_ns,
    count(TpotNs) AS tpot_requests,
    quantilesExactInclusive(0.5, 0.95, 0.99)(TpotNs) AS tpot,
    avg(TpotNs) AS tpot_mean_ns
FROM hotspan_trace_summary_by_time FINAL
WHERE {conditions}
GROUP BY group_key
ORDER BY group_key
"""
"""Per group: request count and p50/p95/p99/mean of end-to-end latency, TTFT and TPOT (ns; TTFT and TPOT over
the requests reporting them)."""

WINDOW_QUALITY = """
SELECT
    {group} AS group_key,
    count() AS requests,
    countIf(ParentlessSpans = 0) AS unrecorded,
    countIf(Enveloped) AS enveloped,
    countIf(ParentlessSpans > 1) AS attached,
    countIf(ExtendedSpans > 0) AS outliving,
    countIf(ImplausibleRoot) AS implausible_root,
    countIf(ReattachedSpans > 0) AS reattached
FROM hotspan_trace_summary_by_time FINAL
WHERE {conditions}
GROUP BY group_key
ORDER BY group_key
"""
"""Per group: the window's requests, and how many of them the analysis repaired, by repair (migration 0080):
``enveloped`` (root missing or never ended), ``attached`` (orphans or second roots attached to the root),
``outliving`` (work kept whole past the end of the span that started it, ancestors extended), ``implausible_root``,
``reattached`` (spans analysed under another parent than they name, any adjuster); ``unrecorded``: requests
analysed before data quality was stored, counted in none of those."""

QUALITY_EXAMPLES = """
SELECT
    repair,
    TraceId AS trace_id,
    DurationNs AS duration_ns
FROM hotspan_trace_summary_by_time FINAL
ARRAY JOIN
    [Enveloped, ParentlessSpans > 1, ExtendedSpans > 0, ImplausibleRoot] AS repaired,
    ['enveloped', 'attached', 'outliving', 'implausible_root'] AS repair
WHERE {conditions} AND repaired
ORDER BY repair, duration_ns DESC, trace_id
LIMIT {{limit:UInt32}} BY repair
"""
"""Per repair of :data:`WINDOW_QUALITY` (but ``reattached``), up to ``limit`` of the window's requests it was made
on, longest first."""

STAGE_SHARES_OVER_TIME = """
SELECT
    intDiv(toUnixTimestamp64Nano(Timestamp), {{bucket_ns:Int64}}) * {{bucket_ns:Int64}} AS bucket_start_ns,
    Stage AS stage,
    count() AS requests,
    sum(StageNs[Stage]) AS stage_ns,
    sum(DurationNs) AS e2e_ns,
    if(e2e_ns > 0, stage_ns / e2e_ns, NULL) AS share_of_e2e
FROM hotspan_trace_summary_by_time FINAL
ARRAY JOIN {{stages:Array(String)}} AS Stage
WHERE {conditions}
GROUP BY bucket_start_ns, stage
ORDER BY bucket_start_ns, indexOf({{stages:Array(String)}}, stage)
"""
"""Per time bucket (of request start, ``bucket_ns`` wide, aligned to the epoch) and stage: the stage's summed
critical-path time and its share of the bucket's summed end-to-end latency."""

HOTSPOT_RANKING = """
SELECT
    ServiceName AS service_name,
    SpanName AS name,
    count() AS spans,
    sum(SelfTimeNs) AS self_total_ns,
    quantileExactInclusive(0.95)(SelfTimeNs) AS self_p95_ns,
    avg(SelfTimeNs) AS self_mean_ns,
    sum(DurationNs) AS duration_total_ns,
    countIf(IsHotspot) AS hotspot_spans,
    if(sum(sum(SelfTimeNs)) OVER () > 0, sum(SelfTimeNs) / sum(sum(SelfTimeNs)) OVER (), NULL) AS self_share,
    if(sum(quantileExactInclusive(0.95)(SelfTimeNs)) OVER () > 0,
       quantileExactInclusive(0.95)(SelfTimeNs) / sum(quantileExactInclusive(0.95)(SelfTimeNs)) OVER (),
       NULL) AS p95_share
FROM hotspan_span_analysis FINAL
WHERE {conditions}
GROUP BY service_name, name
ORDER BY {order} DESC, service_name, name
LIMIT {{limit:UInt32}}
"""
"""(service, operation) pairs of the window's spans ranked by ``{order}`` (``self_total_ns`` or ``self_p95_ns``),
with their self-time total, p95 and mean (ns), summed duration, flagged spans, their share of all self time in
the window and their p95's share of the summed p95s of every pair."""

RANKING_ORDERS = {"self_total_ns": "self_total_ns", "self_p95_ns": "self_p95_ns"}
"""The columns :data:`HOTSPOT_RANKING` may be ordered by."""

FLAGGED_SPANS = """
SELECT
    TraceId AS trace_id,
    SpanId AS span_id,
    ServiceName AS service_name,
    SpanName AS name,
    Stage AS stage,
    toUnixTimestamp64Nano(Timestamp) AS start_time_unix_nano,
    DurationNs AS duration_ns,
    SelfTimeNs AS self_time_ns,
    HotspotReason AS reason,
    HotspotThresholdMs AS threshold_ms
FROM hotspan_span_analysis FINAL
WHERE IsHotspot AND {conditions}
ORDER BY duration_ns DESC, trace_id, span_id
LIMIT {{limit:UInt32}}
"""
"""The window's flagged spans, longest first."""

FLAME_NODES = """
WITH matched AS (
    SELECT TraceId
    FROM hotspan_trace_summary_by_time FINAL
    WHERE {conditions}
)
SELECT
    FlameNode AS node,
    any(FlameParent) AS parent,
    any(Depth) AS depth,
    any(ServiceName) AS service_name,
    any(SpanName) AS name,
    sum(SelfTimeNs) AS self_ns,
    count() AS count,
    (SELECT count() FROM matched) AS traces
FROM hotspan_span_analysis FINAL
WHERE {owner} AND TraceId IN matched
GROUP BY node
ORDER BY depth, node
"""
"""Aggregated flame graph: every span of the matched traces grouped by its flame node (the path of
``service:operation`` from its root, ``processors.pipeline.flame``), with summed self time (ns), span count and
the number of matched traces. Nodes only; totals and the virtual root are added by the caller."""

SPAN_MATCH = """TraceId IN (
        SELECT TraceId FROM hotspan_span_analysis
        WHERE {owner} AND {span_conditions}
    )"""
"""Condition on the summary: the trace has a span meeting ``{span_conditions}`` (service, operation)."""

TRACE_SUMMARIES = """
SELECT
    TraceId AS trace_id,
    RootSpanId AS root_span_id,
    RootService AS root_service,
    RootName AS root_name,
    toUnixTimestamp64Nano(Timestamp) AS start_time_unix_nano,
    DurationNs AS duration_ns,
    SpanCount AS span_count,
    ServiceCount AS service_count,
    ErrorCount AS error_count,
    HotspotCount AS hotspot_count,
    RequestTenant AS tenant,
    Model AS model,
    LlmCalls AS llm_calls,
    TtftNs AS ttft_ns,
    TpotNs AS tpot_ns,
    arrayMap(stage -> StageNs[stage], {{stages:Array(String)}}) AS stage_ns,
    AnalysedSpans AS analysed_spans,
    Version AS version,
    InputTokens AS input_tokens,
    OutputTokens AS output_tokens,
    CachedInputTokens AS cached_input_tokens,
    ReasoningTokens AS reasoning_tokens,
    Sampled AS sampled,
    Enveloped AS enveloped,
    ParentlessSpans AS parentless_spans,
    ReattachedSpans AS reattached_spans,
    OutlivingSpans AS outliving_spans,
    ExtendedSpans AS extended_spans,
    ExtendedNs AS extended_ns,
    ImplausibleRoot AS implausible_root
FROM hotspan_trace_summary_by_time FINAL
WHERE {conditions}
ORDER BY start_time_unix_nano DESC, trace_id
LIMIT {{limit:UInt32}}
"""
"""The window's request summaries, newest first; ``stage_ns`` lists the stage totals in ``stages`` order."""

SPAN_ROWS = """
SELECT
    TraceId AS trace_id,
    SpanId AS span_id,
    ParentSpanId AS parent_span_id,
    ServiceName AS service_name,
    SpanName AS name,
    SpanKind AS kind,
    Stage AS stage,
    toUnixTimestamp64Nano(Timestamp) AS start_time_unix_nano,
    DurationNs AS duration_ns,
    SelfTimeNs AS self_time_ns,
    OnCriticalPath AS on_critical_path,
    CriticalPathNs AS critical_path_ns,
    Depth AS depth,
    IsError AS is_error,
    RequestTenant AS tenant,
    IsHotspot AS is_hotspot,
    HotspotReason AS hotspot_reason,
    HotspotThresholdMs AS hotspot_threshold_ms,
    Model AS model,
    LlmCall AS llm_call,
    InputTokens AS input_tokens,
    OutputTokens AS output_tokens,
    CachedInputTokens AS cached_input_tokens,
    ReasoningTokens AS reasoning_tokens,
    TtftNs AS ttft_ns
FROM hotspan_span_analysis FINAL
WHERE {conditions}
ORDER BY start_time_unix_nano DESC, trace_id, span_id
LIMIT {{limit:UInt32}}
"""
"""The window's analysed spans, newest first."""

USAGE_GROUP_COLUMNS = {
    "service": "summary.RootService",
    "model": "usage.model",
    "tenant": "summary.RequestTenant",
    "": "''",
}
"""Grouping of :data:`TOKEN_USAGE`: the request's root service, the model of the calls, the tenant the request's
spans name, or none."""

MODEL_USAGE = """
SELECT
    TraceId AS trace_id,
    Model AS model,
    countIf(LlmCall) AS llm_calls,
    sum(InputTokens) AS input_tokens,
    sum(OutputTokens) AS output_tokens,
    sum(CachedInputTokens) AS cached_input_tokens,
    sum(ReasoningTokens) AS reasoning_tokens
FROM hotspan_span_analysis FINAL
WHERE {owner} AND (LlmCall OR InputTokens + OutputTokens + CachedInputTokens + ReasoningTokens > 0) AND {traces}
GROUP BY trace_id, model"""
"""Per (trace, model): the model calls made and the tokens counted (``analysis.model_calls``). A template:
``{traces}`` restricts the traces (an ID list, or a summary subquery)."""

TRACE_USAGE = f"""
SELECT
    summary.TraceId AS trace_id,
    summary.LlmCalls AS llm_calls,
    summary.InputTokens AS input_tokens,
    summary.OutputTokens AS output_tokens,
    summary.CachedInputTokens AS cached_input_tokens,
    summary.ReasoningTokens AS reasoning_tokens,
    if(empty(summary.StageNs), '',
       mapKeys(summary.StageNs)[indexOf(mapValues(summary.StageNs), arrayMax(mapValues(summary.StageNs)))])
        AS dominant_stage,
    summary.StageNs[{{stage:String}}] AS stage_ns,
    usage.model AS model,
    usage.input_tokens AS model_input_tokens,
    usage.output_tokens AS model_output_tokens,
    usage.cached_input_tokens AS model_cached_input_tokens
FROM hotspan_trace_summary AS summary FINAL
LEFT JOIN ({MODEL_USAGE.format(owner=OWNER_FILTER, traces="TraceId IN {trace_ids:Array(String)}")}) AS usage
    ON usage.trace_id = summary.TraceId
WHERE {tenant_condition("summary.Tenant")} AND summary.TraceId IN {{trace_ids:Array(String)}}
ORDER BY trace_id, model
"""
"""Per analysed trace among ``trace_ids``: its model calls, token totals, dominant stage (the stage with the
most critical-path time) and the critical-path ns of ``{stage:String}`` (0 for none, or a stage it spent nothing in),
one row per model its calls used (model columns null without any), for the cost."""

TOKEN_USAGE = """
SELECT
    {group} AS group_key,
    usage.model AS model,
    uniqExact(usage.trace_id) AS requests,
    sum(usage.llm_calls) AS llm_calls,
    sum(usage.input_tokens) AS input_tokens,
    sum(usage.output_tokens) AS output_tokens,
    sum(usage.cached_input_tokens) AS cached_input_tokens,
    sum(usage.reasoning_tokens) AS reasoning_tokens
FROM ({model_usage}) AS usage
INNER JOIN (
    SELECT TraceId, RootService, RequestTenant FROM hotspan_trace_summary_by_time FINAL WHERE {conditions}
) AS summary ON summary.TraceId = usage.trace_id
GROUP BY group_key, model
ORDER BY group_key, model
"""
"""Per group and model, over the window's analysed requests (``{conditions}`` on the summary): requests using
the model, model calls and tokens. ``{group}`` is one of :data:`USAGE_GROUP_COLUMNS`."""
