"""SQL for the ``otel_traces`` family, in one place. Every value is a bound ``{name:Type}`` parameter.

Readers accept both spellings the exporter has written over time: ``Server``/``Ok`` and the older
``SPAN_KIND_SERVER``/``STATUS_CODE_OK``; the expressions below fold them to the new one.
"""

from __future__ import annotations

KIND = "initcap(replaceRegexpOne(SpanKind, '^SPAN_KIND_', ''))"
STATUS = "initcap(replaceRegexpOne(StatusCode, '^STATUS_CODE_', ''))"
START_NS = "toUnixTimestamp64Nano(Timestamp)"

SERVICES = "SELECT DISTINCT ServiceName FROM otel_traces ORDER BY ServiceName"

OPERATIONS = f"""
SELECT SpanName AS name, {KIND} AS span_kind
FROM otel_traces
WHERE ServiceName = {{service:String}}
GROUP BY name, span_kind
ORDER BY name, span_kind
"""

TRACE_SPANS = f"""
SELECT
    TraceId AS trace_id,
    SpanId AS span_id,
    ParentSpanId AS parent_span_id,
    SpanName AS name,
    ServiceName AS service_name,
    {KIND} AS kind,
    {START_NS} AS start_time_unix_nano,
    toInt64({START_NS} + Duration) AS end_time_unix_nano,
    Duration AS duration_ns,
    {STATUS} AS status_code,
    StatusMessage AS status_message,
    TraceState AS trace_state,
    ScopeName AS scope_name,
    ScopeVersion AS scope_version,
    SpanAttributes AS attributes,
    ResourceAttributes AS resource_attributes,
    arrayMap(t -> toUnixTimestamp64Nano(t), Events.Timestamp) AS event_times_unix_nano,
    Events.Name AS event_names,
    Events.Attributes AS event_attributes,
    Links.TraceId AS link_trace_ids,
    Links.SpanId AS link_span_ids,
    Links.TraceState AS link_trace_states,
    Links.Attributes AS link_attributes
FROM otel_traces
WHERE TraceId = {{trace_id:String}}
ORDER BY start_time_unix_nano, span_id
"""

SEARCH_SPAN_FILTERS = {
    "service": "ServiceName = {service:String}",
    "operation": "SpanName = {operation:String}",
    "start_ns": "Timestamp >= fromUnixTimestamp64Nano({start_ns:Int64})",
    "end_ns": "Timestamp <= fromUnixTimestamp64Nano({end_ns:Int64})",
    "min_duration_ns": "Duration >= {min_duration_ns:UInt64}",
    "max_duration_ns": "Duration <= {max_duration_ns:UInt64}",
}
"""Span-level conditions of a trace search, by parameter name; only those whose parameter is set apply."""

ATTRIBUTE_FILTER = (
    "(SpanAttributes[{{attr_key_{i}:String}}] = {{attr_value_{i}:String}}"
    " OR ResourceAttributes[{{attr_key_{i}:String}}] = {{attr_value_{i}:String}})"
)
"""One ``key=value`` condition, matched against span or resource attributes; ``{i}`` numbers it."""

SEARCH = f"""
WITH matched AS (
    SELECT TraceId, max(Timestamp) AS last_seen
    FROM otel_traces
    WHERE {{conditions}}
    GROUP BY TraceId
    ORDER BY last_seen DESC
    LIMIT {{{{limit:UInt32}}}}
)
SELECT
    TraceId AS trace_id,
    if(countIf(ParentSpanId = '') > 0,
       argMinIf(ServiceName, Timestamp, ParentSpanId = ''), argMin(ServiceName, Timestamp)) AS root_service,
    if(countIf(ParentSpanId = '') > 0,
       argMinIf(SpanName, Timestamp, ParentSpanId = ''), argMin(SpanName, Timestamp)) AS root_name,
    min({START_NS}) AS start_time_unix_nano,
    toUInt64(max({START_NS} + Duration) - min({START_NS})) AS duration_ns,
    count() AS span_count,
    uniqExact(ServiceName) AS service_count,
    countIf({STATUS} = 'Error') AS error_count
FROM otel_traces
WHERE TraceId IN (SELECT TraceId FROM matched)
GROUP BY TraceId
ORDER BY start_time_unix_nano DESC
"""
