"""SQL for the ``otel_traces`` family, in one place. Every value is a bound ``{name:Type}`` parameter.

Readers accept both spellings the exporter has written over time: ``Server``/``Ok`` and the older
``SPAN_KIND_SERVER``/``STATUS_CODE_OK``; the expressions below fold them to the new one.

Every read of ``otel_traces`` carries :data:`TENANT_FILTER`, bound by
:func:`storage.tenancy.tenant_parameters`: each ``FROM otel_traces`` of a query has its own, so spans another
tenant stored under the same trace ID never join in (``tests/security`` checks every query here).
"""

from __future__ import annotations

from storage.tenancy import DEFAULT_TENANT

KIND = "initcap(replaceRegexpOne(SpanKind, '^SPAN_KIND_', ''))"
STATUS = "initcap(replaceRegexpOne(StatusCode, '^STATUS_CODE_', ''))"
START_NS = "toUnixTimestamp64Nano(Timestamp)"
HOTSPOT = "SpanAttributes['hotspan.hotspot'] = 'true'"
"""A span flagged by Hotspan's SDK ``HotspotSpanProcessor`` (``processors.sdk``)."""

TENANT = f"if(Tenant = '', '{DEFAULT_TENANT}', Tenant)"
"""A span's tenant: ``Tenant``, with ``''`` (rows written before migration 0030 or by an OTel Collector) read as
the default tenant."""

TENANT_FILTER = f"({{all_tenants:Bool}} OR {TENANT} = {{tenant:String}})"
"""The tenant condition of every read: the caller's tenant only, or every tenant for an admin
(``all_tenants``); parameters from :func:`storage.tenancy.tenant_parameters`. Holds bound-parameter braces:
insert it into ``str.format`` templates as a field value, never as template text."""

SERVICES = f"SELECT DISTINCT ServiceName FROM otel_traces WHERE {TENANT_FILTER} ORDER BY ServiceName"

OPERATIONS = f"""
SELECT SpanName AS name, {KIND} AS span_kind
FROM otel_traces
WHERE ServiceName = {{service:String}} AND {TENANT_FILTER}
GROUP BY name, span_kind
ORDER BY name, span_kind
"""

SPAN_COLUMNS = f"""
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
    Links.Attributes AS link_attributes"""
"""The span columns every full-span read returns (see ``TraceReader.trace``); holds no braces, so the
queries that embed it can still be ``str.format``-ed."""

TRACE_SPANS = f"""
SELECT{SPAN_COLUMNS}
FROM otel_traces
WHERE TraceId = {{trace_id:String}} AND {TENANT_FILTER}
ORDER BY start_time_unix_nano, span_id
"""

SEARCH_SPAN_FILTERS = {
    "service": "ServiceName = {service:String}",
    "operation": "SpanName = {operation:String}",
    "start_ns": "Timestamp >= fromUnixTimestamp64Nano({start_ns:Int64})",
    "end_ns": "Timestamp <= fromUnixTimestamp64Nano({end_ns:Int64})",
    "min_duration_ns": "Duration >= {min_duration_ns:UInt64}",
    "max_duration_ns": "Duration <= {max_duration_ns:UInt64}",
    "status_code": f"{STATUS} = {{status_code:String}}",
    "span_kind": f"{KIND} = {{span_kind:String}}",
    "hotspot": f"({HOTSPOT}) = {{hotspot:Bool}}",
}
"""Span-level conditions of a trace search, by parameter name; only those whose parameter is set apply."""

ATTRIBUTE_FILTER = (
    "(SpanAttributes[{{attr_key_{i}:String}}] = {{attr_value_{i}:String}}"
    " OR ResourceAttributes[{{attr_key_{i}:String}}] = {{attr_value_{i}:String}})"
)
"""One ``key=value`` condition, matched against span or resource attributes; ``{i}`` numbers it."""

MATCHED_TRACES = """
WITH matched AS (
    SELECT TraceId, max(Timestamp) AS last_seen
    FROM otel_traces
    WHERE {tenant} AND {conditions}
    GROUP BY TraceId
    ORDER BY last_seen DESC
    LIMIT {{limit:UInt32}}
)"""
"""The traces a search finds: those with a span meeting ``{conditions}``, the most recently active first, at
most ``{limit:UInt32}`` of them. A template: the builder fills ``{conditions}`` and ``{tenant}`` (with
:data:`TENANT_FILTER`) by ``str.format``."""

SEARCH = (
    MATCHED_TRACES
    + f"""
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
    countIf({STATUS} = 'Error') AS error_count,
    countIf({HOTSPOT}) AS hotspot_count
FROM otel_traces
WHERE TraceId IN (SELECT TraceId FROM matched) AND {{tenant}}
GROUP BY TraceId
ORDER BY start_time_unix_nano DESC
"""
)

SEARCH_SPANS = (
    MATCHED_TRACES
    + f"""
SELECT{SPAN_COLUMNS}
FROM otel_traces
WHERE TraceId IN (SELECT TraceId FROM matched) AND {{tenant}}
ORDER BY trace_id, start_time_unix_nano, span_id
"""
)
"""Every span of the traces a search finds (the Jaeger APIs answer a search with whole traces)."""

DEPENDENCIES = f"""
WITH children AS (
    SELECT DISTINCT TraceId, SpanId, ParentSpanId, ServiceName
    FROM otel_traces
    WHERE ParentSpanId != ''
      AND Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}})
      AND Timestamp <= fromUnixTimestamp64Nano({{end_ns:Int64}})
      AND {TENANT_FILTER}
)
SELECT p.ServiceName AS parent, c.ServiceName AS child, count() AS call_count
FROM children AS c
INNER JOIN (
    SELECT DISTINCT TraceId, SpanId, ServiceName
    FROM otel_traces
    WHERE TraceId IN (SELECT TraceId FROM children) AND {TENANT_FILTER}
) AS p ON c.TraceId = p.TraceId AND c.ParentSpanId = p.SpanId
WHERE p.ServiceName != c.ServiceName
GROUP BY parent, child
ORDER BY parent, child
"""
"""Service-to-service calls: parent→child span pairs whose services differ, counted per (parent, child) service,
for child spans starting inside the window (Jaeger's dependency rule). Rows are made distinct first because an
exporter that retries may have stored a span twice; the parent may start before the window."""
