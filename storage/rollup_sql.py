"""SQL for Hotspan's per-minute rollups: RED (``hotspan_red_minutes``) and the service graph
(``hotspan_service_graph_edges`` → ``hotspan_service_graph_minutes``). Every value is a bound ``{name:Type}``
parameter. Every query is a ``str.format`` template (bound parameters written ``{{name:Type}}``) whose fields
(``{conditions}``, ``{keys}``, ``{group}``) take fixed fragments chosen by :mod:`storage.rollup_reader`; the tenant
condition is always among the ``{conditions}``.

Rollups are per minute (UTC). A window ``[start_ns, end_ns]`` reads the minutes whose start lies in
``[minute of start_ns, end_ns]``, so it is widened to whole minutes at its start. Durations are ns;
quantiles are ClickHouse's ``quantiles`` (reservoir sampling of up to 8192 values per state: exact below
that, approximate above) and come back as Float64 ns, NaN where no value was seen.
"""

from __future__ import annotations

SPAN_BUCKETS_MS: tuple[int, ...] = (2, 4, 6, 8, 10, 50, 100, 200, 400, 800, 1000, 1400, 2000, 5000, 10000, 15000)
"""Upper bounds (ms, inclusive) of the span-duration histogram: the OTel Collector spanmetrics connector's
defaults (``defaultHistogramBucketsMs``). ``hotspan_red_minutes.DurationBuckets`` (migrations 0022/0023) and
``traces_span_metrics_duration_milliseconds`` use exactly these, so latency SLOs evaluate the same in
ClickHouse and in Prometheus."""

CARDINALITY_LIMIT = 2000
"""Default most groups of a RED or service-graph read, and most series per metric family on ``/metrics``
(``HOTSPAN_CARDINALITY_LIMIT``)."""

INF_BUCKET = 4294967295
"""``DurationBuckets`` key of the ``+Inf`` bucket (the largest UInt32)."""

MINUTES = """
    Timestamp >= toStartOfMinute(fromUnixTimestamp64Nano({{start_ns:Int64}}))
    AND Timestamp <= fromUnixTimestamp64Nano({{end_ns:Int64}})"""
"""The minutes of a window (see the module docstring)."""

RED_KEYS = {
    "service": ("ServiceName AS service",),
    "operation": ("ServiceName AS service", "SpanName AS operation", "SpanKind AS span_kind"),
}
"""Group keys of a RED read by ``group_by``; builders join them into ``{keys}`` and ``{group}``."""

RED_FILTERS = {
    "service": "ServiceName = {service:String}",
    "operation": "SpanName = {operation:String}",
    "span_kind": "SpanKind = {span_kind:String}",
}
"""Optional conditions of a RED read, by parameter name; kinds are stored folded (``Server``...). Plain strings:
they are inserted into ``{conditions}`` as values, so their braces stay single."""


def kept(table: str, columns: str, calls: str) -> str:
    """The ``kept`` CTE (a template) of a read bounded by its ``limit`` parameter: the ``columns`` (a group's or
    an edge's) of the ``limit`` groups of ``table`` with the most ``calls`` (an aggregate) in the window, ties by
    the columns."""
    return f"""
WITH kept AS (
    SELECT {columns}
    FROM {table}
    WHERE{MINUTES} AND {{conditions}}
    GROUP BY {columns}
    ORDER BY {calls} DESC, {columns}
    LIMIT {{{{limit:UInt64}}}}
)"""


RED_KEPT = kept("hotspan_red_minutes", "{raw}", "sum(Calls)")
"""The groups a RED read keeps (``{raw}``: the group's columns): the ``limit`` with the most calls in the window,
ties by name. Every other group folds into one overflow row (``overflow`` = 1, keys empty), so a read holds at
most ``limit + 1`` groups whatever the senders named (the cardinality limit, ``HOTSPAN_CARDINALITY_LIMIT``).
``{keys}`` are the folded keys: ``if(overflow, '', <column>) AS <name>``."""

RED_TOTALS = (
    RED_KEPT
    + """
SELECT
    ({raw}) NOT IN kept AS overflow,
    {keys},
    sum(Calls) AS calls,
    sum(Errors) AS errors,
    sum(DurationSum) AS duration_sum_ns,
    max(DurationMax) AS duration_max_ns,
    quantilesMerge(0.5, 0.95, 0.99)(DurationQuantiles) AS q
FROM hotspan_red_minutes
WHERE"""
    + MINUTES
    + """ AND {conditions}
GROUP BY overflow, {group}
ORDER BY overflow, {group}
"""
)
"""RED over the whole window per kept group and the overflow row: calls, errors, total and max duration (ns), and
``q`` = ``[p50, p95, p99]`` in ns."""

RED_SERIES = (
    RED_KEPT
    + """
SELECT
    ({raw}) NOT IN kept AS overflow,
    {keys},
    toInt64(intDiv(toUnixTimestamp(Timestamp), {{step_s:UInt32}}) * {{step_s:UInt32}}) * 1000000000 AS bucket_start_ns,
    sum(Calls) AS calls,
    sum(Errors) AS errors,
    quantilesMerge(0.5, 0.95, 0.99)(DurationQuantiles) AS q
FROM hotspan_red_minutes
WHERE"""
    + MINUTES
    + """ AND {conditions}
GROUP BY overflow, {group}, bucket_start_ns
ORDER BY overflow, {group}, bucket_start_ns
"""
)
"""RED per kept group (and the overflow row) and step (``step_s`` a multiple of 60, aligned to the Unix epoch); only
steps with calls."""

RED_COUNTS = (
    """
SELECT sum(Calls) AS calls, sum(Errors) AS errors, sumMap(DurationBuckets) AS buckets
FROM hotspan_red_minutes
WHERE"""
    + MINUTES
    + """ AND {conditions}
"""
)
"""Calls, errors and the per-bucket span counts (``{le_ms: count}``) of one selection over a window: what an
SLO evaluation needs, as Prometheus would see it through the span metrics."""

RED_SERVICES = (
    """
SELECT DISTINCT ServiceName FROM hotspan_red_minutes
WHERE"""
    + MINUTES
    + """
  AND {conditions}
ORDER BY ServiceName
"""
)
"""Services that stored spans in the window."""

EDGE_COLUMNS = "Client, Server, ConnectionType"
"""The columns naming an edge of the service graph."""

EDGE_KEYS = """
    (Client, Server, ConnectionType) NOT IN kept AS overflow,
    if(overflow, '', Client) AS client,
    if(overflow, '', Server) AS server,
    if(overflow, '', ConnectionType) AS connection_type,"""
"""An edge's keys, folded into one overflow edge (``overflow`` = 1, names empty) beyond the kept edges."""

SERVICE_GRAPH_EDGES = (
    kept("hotspan_service_graph_minutes", EDGE_COLUMNS, "sum(Calls)")
    + """
SELECT"""
    + EDGE_KEYS
    + """
    sum(Calls) AS calls,
    sum(Failed) AS errors,
    quantilesMerge(0.5, 0.95, 0.99)(ClientDurationQuantiles) AS client_q,
    quantilesMerge(0.5, 0.95, 0.99)(ServerDurationQuantiles) AS server_q
FROM hotspan_service_graph_minutes
WHERE"""
    + MINUTES
    + """ AND {conditions}
GROUP BY overflow, client, server, connection_type
ORDER BY overflow, client, server, connection_type
"""
)
"""Edges of the service graph over a window: calls, failed calls, and ``[p50, p95, p99]`` ns as seen by the
client span and by the server span (NaN when that side has no span: a virtual peer or the "user"). The ``limit``
edges with the most calls (ties by names) keep their own row, the rest fold into one overflow row, as
:data:`RED_KEPT` does for RED."""

SERVICE_GRAPH_EDGES_SCOPED = (
    kept("hotspan_service_graph_edges", EDGE_COLUMNS, "count()")
    + """
SELECT"""
    + EDGE_KEYS
    + """
    toUInt64(count()) AS calls,
    toUInt64(sum(Failed)) AS errors,
    quantilesIf(0.5, 0.95, 0.99)(ClientDuration, HasClientSpan = 1) AS client_q,
    quantilesIf(0.5, 0.95, 0.99)(ServerDuration, HasServerSpan = 1) AS server_q
FROM hotspan_service_graph_edges
WHERE"""
    + MINUTES
    + """ AND {conditions}
GROUP BY overflow, client, server, connection_type
ORDER BY overflow, client, server, connection_type
"""
)
"""The edges of :data:`SERVICE_GRAPH_EDGES` over the same minutes, from the calls themselves, for a scope
(:data:`EDGE_SCOPE_FILTERS` among the ``{conditions}``): the minute rollup keeps no span names or request tenants."""

EDGE_SCOPE_FILTERS = {
    "service": "(Client = {{service:String}} OR Server = {{service:String}})",
    "operation": "(ClientSpanName = {{operation:String}} OR ServerSpanName = {{operation:String}})",
    "request_tenant": "TraceId IN (SELECT TraceId FROM hotspan_trace_summary FINAL "
    "WHERE RequestTenant = {{request_tenant:String}} AND {conditions})",
}
"""Conditions on ``hotspan_service_graph_edges`` rows, by scope: calls made or received by a service, calls whose
client or server span has a name, calls of requests whose spans name a tenant (the trace summary's
``RequestTenant``). Templates: ``{conditions}`` takes the tenant condition of the summary read."""

EDGE_EXAMPLES = """
SELECT
    TraceId AS trace_id,
    toUnixTimestamp64Nano(Timestamp) AS start_time_unix_nano,
    ClientSpanName AS client_operation,
    ServerSpanName AS server_operation,
    if(HasClientSpan = 1, toInt64(ClientDuration), NULL) AS client_duration_ns,
    if(HasServerSpan = 1, toInt64(ServerDuration), NULL) AS server_duration_ns,
    Failed = 1 AS failed
FROM hotspan_service_graph_edges
WHERE Client = {{client:String}}
  AND Server = {{server:String}}
  AND Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}})
  AND Timestamp <= fromUnixTimestamp64Nano({{end_ns:Int64}})
  AND {conditions}
  AND (Tenant, TraceId) NOT IN (SELECT Tenant, TraceId FROM hotspan_trace_summary WHERE NOT Sampled)
ORDER BY failed DESC, greatest(ClientDuration, ServerDuration) DESC, trace_id
LIMIT 1 BY trace_id
LIMIT {{limit:UInt32}}
"""
"""Traces with a call on one edge in a window: failed calls first, then the slowest; one row per trace. Traces tail
sampling dropped (their summary says ``Sampled = false``, migration 0050) are no examples: their spans are gone."""

RED_TIME_RANGE = """
SELECT
    toInt64(toUnixTimestamp(min(Timestamp))) * 1000000000 AS first_minute_ns,
    toInt64(toUnixTimestamp(max(Timestamp)) + 60) * 1000000000 AS end_ns,
    count() AS rows
FROM hotspan_red_minutes
WHERE {conditions}
"""
"""Start of the first and end of the last minute holding spans (ns), for "all time" windows."""

STAGE_COUNTS = """
SELECT count() AS requests, countIf(StageNs[{{stage:String}}] > {{threshold_ns:UInt64}}) AS slow
FROM hotspan_trace_summary_by_time FINAL
WHERE RootService = {{service:String}}
  AND Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}})
  AND Timestamp <= fromUnixTimestamp64Nano({{end_ns:Int64}})
  AND {conditions}
"""
"""Requests (traces) of a root service that started in a window, and those whose critical path spent more than
``threshold_ns`` in ``stage`` (the trace pipeline's ``hotspan_trace_summary.StageNs``): a stage SLO's counts."""

HOTSPOT_COUNTS = """
SELECT ServiceName AS service_name, HotspotReason AS reason, count() AS spans
FROM hotspan_span_analysis FINAL
WHERE TraceId IN {{trace_ids:Array(String)}} AND IsHotspot AND {conditions}
GROUP BY service_name, reason
ORDER BY service_name, reason
"""
"""Hotspot spans the trace pipeline flagged in some traces, per service and reason."""
