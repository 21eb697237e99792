"""SQL of the anomaly detector: the per-minute series it baselines (from the RED rollup and the request summaries)
and its incidents (``hotspan_incidents``, migration 0060). Every value is a bound ``{name:Type}`` parameter; the
templates are ``str.format`` strings (bound parameters written ``{{name:Type}}``) whose fields take fixed fragments
chosen by :mod:`storage.incident_store`: ``{bucket}`` (one of :data:`MINUTE_BUCKET`, :data:`SUMMARY_MINUTE_BUCKET`,
:data:`WHOLE_WINDOW`), ``{also}`` (:data:`ALSO_SPAN` or nothing) and ``{conditions}`` (the tenant condition,
:func:`storage.tenancy.tenant_condition`, and fixed filters).

A series row is one tenant's (service, name, span kind) in one bucket: ``calls``, ``errors`` and ``p95_ns`` (Float64
ns, NaN without values); rows come in no particular order (sorting every tenant's 30 minutes of a fleet's series took
ClickHouse longer than reading them). Windows are half-open ``[start_ns, end_ns)`` on whole minutes.
"""

from __future__ import annotations

MINUTE_BUCKET = "toInt64(toUnixTimestamp(Timestamp)) * 1000000000"
"""Bucket of a RED rollup row: its minute (the rollup is per minute already), ns."""

SUMMARY_MINUTE_BUCKET = "toInt64(toUnixTimestamp(toStartOfMinute(Timestamp))) * 1000000000"
"""Bucket of a request summary: the minute its request started, ns."""

WHOLE_WINDOW = "{start_ns:Int64}"
"""One bucket for the whole window, named by its start."""

ALSO_SPAN = """
    OR Timestamp >= fromUnixTimestamp64Nano({also_start_ns:Int64})
       AND Timestamp < fromUnixTimestamp64Nano({also_end_ns:Int64})"""
"""``{also}`` of a per-minute read of two spans of minutes at once (``''`` for one): a trailing and a seasonal
baseline, a day apart, read in one query (the request summaries' ``FINAL`` merges every stored summary whatever the
span: once, not twice)."""

OPERATION_SERIES = """
SELECT
    Tenant AS tenant,
    ServiceName AS service,
    SpanName AS name,
    SpanKind AS span_kind,
    {bucket} AS bucket_ns,
    sum(Calls) AS calls,
    sum(Errors) AS errors,
    quantilesMerge(0.5, 0.95, 0.99)(DurationQuantiles)[2] AS p95_ns
FROM hotspan_red_minutes
WHERE (Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}})
       AND Timestamp < fromUnixTimestamp64Nano({{end_ns:Int64}}){also})
  AND {conditions}
GROUP BY tenant, service, name, span_kind, bucket_ns
"""
"""Per tenant, (service, operation, span kind) and bucket, from ``hotspan_red_minutes``: spans, failed spans, p95
duration (ClickHouse's ``quantiles`` states merged; exact below 8192 values)."""

STAGE_SERIES = """
SELECT
    Tenant AS tenant,
    RootService AS service,
    stage AS name,
    '' AS span_kind,
    {bucket} AS bucket_ns,
    count() AS calls,
    countIf(ErrorCount > 0) AS errors,
    quantile(0.95)(stage_ns) AS p95_ns
FROM hotspan_trace_summary_by_time FINAL
ARRAY JOIN mapKeys(StageNs) AS stage, mapValues(StageNs) AS stage_ns
WHERE (Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}})
       AND Timestamp < fromUnixTimestamp64Nano({{end_ns:Int64}}){also})
  AND {conditions}
GROUP BY tenant, service, name, span_kind, bucket_ns
"""
"""Per tenant, (root service, stage) and bucket, from the trace pipeline's request summaries: requests that spent time
in the stage, those of them with an error span, and the p95 of the stage's critical-path time per request (ns)."""

# Filled by two str.format passes (parts, then the tenant condition): bound parameters carry four braces here.
_IN_WINDOW = """Timestamp >= fromUnixTimestamp64Nano({{{{start_ns:Int64}}}})
        AND Timestamp < fromUnixTimestamp64Nano({{{{end_ns:Int64}}}})"""
_IN_BASELINE = """Timestamp >= fromUnixTimestamp64Nano({{{{baseline_start_ns:Int64}}}})
        AND Timestamp < fromUnixTimestamp64Nano({{{{baseline_end_ns:Int64}}}})"""
_THRESHOLD = "{{{{threshold_ns:Int64}}}}"

EXCEEDANCES = f"""
SELECT
    countIf({_IN_WINDOW}) AS calls,
    countIf({_IN_WINDOW} AND {{value}} > {_THRESHOLD}) AS over,
    countIf({_IN_WINDOW} AND {{failed}}) AS errors,
    countIf({_IN_BASELINE}) AS baseline_calls,
    countIf({_IN_BASELINE} AND {{value}} > {_THRESHOLD}) AS baseline_over,
    countIf({_IN_BASELINE} AND {{failed}}) AS baseline_errors
FROM {{source}}
WHERE {{series}} AND (({_IN_WINDOW}) OR ({_IN_BASELINE}))
"""
"""One series counted call by call in a window ``[start_ns, end_ns)`` and in its baseline window
``[baseline_start_ns, baseline_end_ns)`` (disjoint): its calls, those slower than ``threshold_ns`` and the failed
ones. A template of templates: ``{source}`` (a table), ``{series}`` (the condition naming one series
and its tenant), ``{value}`` (a call's duration, ns) and ``{failed}`` (a call failed) come from
:data:`OPERATION_EXCEEDANCE_PARTS` or :data:`STAGE_EXCEEDANCE_PARTS`; the result is then a ``str.format`` template
whose ``{conditions}`` field takes the tenant condition."""

OPERATION_EXCEEDANCE_PARTS = {
    "source": "otel_traces",
    "series": "ServiceName = {{service:String}} AND SpanName = {{name:String}} AND {kind} = {{span_kind:String}}"
    " AND Version = 0 AND {conditions}",
    "value": "Duration",
    "failed": "{status} = 'Error'",
}
"""A (service, operation, span kind)'s spans as the RED rollup counts them (each span's first stored copy,
migration 0032); ``{kind}`` and ``{status}`` take :mod:`storage.trace_sql`'s normalising expressions."""

STAGE_EXCEEDANCE_PARTS = {
    "source": "(SELECT Tenant, Timestamp, RootService, ErrorCount, StageNs FROM hotspan_trace_summary_by_time FINAL)"
    " ARRAY JOIN mapKeys(StageNs) AS stage, mapValues(StageNs) AS stage_ns",
    "series": "RootService = {{service:String}} AND stage = {{name:String}} AND {conditions}",
    "value": "stage_ns",
    "failed": "ErrorCount > 0",
}
"""A (root service, stage)'s requests, as :data:`STAGE_SERIES` counts them: the stage's critical-path time per
request, a request failed when it holds an error span."""

ROOT_SHAPE = """
SELECT
    request.tenant AS tenant,
    request.service AS service,
    span.ServiceName AS span_service,
    span.SpanName AS name,
    request.current AS current,
    count() AS spans,
    max(span.bytes) AS max_bytes
FROM (
    SELECT {tenant} AS tenant, TraceId, ServiceName, SpanName,
           arrayMax(arrayPushBack(arrayMap(key -> toFloat64OrZero(SpanAttributes[key]), {{size_keys:Array(String)}}),
                                  0.)) AS bytes
    FROM otel_traces
    WHERE Timestamp >= fromUnixTimestamp64Nano({{previous_ns:Int64}}) AND Version = 0 AND {span_conditions}
) AS span
GLOBAL INNER JOIN (
    SELECT Tenant AS tenant, TraceId, RootService AS service,
           Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}}) AS current
    FROM hotspan_trace_summary_by_time FINAL
    WHERE Timestamp >= fromUnixTimestamp64Nano({{previous_ns:Int64}})
      AND Timestamp < fromUnixTimestamp64Nano({{end_ns:Int64}})
      AND {conditions}
) AS request ON span.tenant = request.tenant AND span.TraceId = request.TraceId
GROUP BY tenant, service, span_service, name, current
ORDER BY tenant, service, span_service, name, current
"""
"""The shape of each root service's requests in the window ``[start_ns, end_ns)`` (``current``) and in the window
before it ``[previous_ns, start_ns)``, requests placed by their start (the summary's ``Timestamp``): per tenant, (root
service, span's service, span name), the spans (each span's first stored copy) and the largest value any of the
``size_keys`` attributes holds (bytes; 0 without one). Spans join their requests by tenant and trace ID, so a read of
every tenant (one scan of the spans, which are not ordered by tenant) holds what each tenant's read does.
``{tenant}`` takes the span's tenant (:data:`storage.trace_sql.TENANT`), ``{span_conditions}`` the span tenant
condition (:data:`storage.trace_sql.TENANT_FILTER`), ``{conditions}`` the summaries'. ``GLOBAL``: on a cluster the
two minutes' requests are read once and sent to every shard's part of the spans."""

ROOT_REQUESTS = """
SELECT Tenant AS tenant, RootService AS service, Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}}) AS current,
       count() AS requests
FROM hotspan_trace_summary_by_time FINAL
WHERE Timestamp >= fromUnixTimestamp64Nano({{previous_ns:Int64}})
  AND Timestamp < fromUnixTimestamp64Nano({{end_ns:Int64}})
  AND {conditions}
GROUP BY tenant, service, current
"""
"""Requests per tenant and root service in the two windows of :data:`ROOT_SHAPE` (a ``str.format`` template:
``{conditions}`` takes the tenant condition)."""

ACTIVE_TENANTS = """
SELECT DISTINCT Tenant FROM hotspan_red_minutes
WHERE Timestamp >= fromUnixTimestamp64Nano({start_ns:Int64})
  AND Timestamp < fromUnixTimestamp64Nano({end_ns:Int64})
ORDER BY Tenant
"""
"""Tenants that stored spans in a window: the detector evaluates each (it acts for every tenant, as the pipeline
does; what it writes is each tenant's own)."""

INCIDENT_COLUMNS = """
    Tenant AS tenant,
    IncidentId AS incident_id,
    Status AS status,
    toUnixTimestamp64Nano(Timestamp) AS window_start_ns,
    toUnixTimestamp64Nano(WindowEnd) AS window_end_ns,
    toUnixTimestamp64Nano(BaselineStart) AS baseline_start_ns,
    toUnixTimestamp64Nano(BaselineEnd) AS baseline_end_ns,
    Seasonal AS seasonal,
    Kind AS kind,
    ServiceName AS service,
    Name AS name,
    SpanKind AS span_kind,
    Metric AS metric,
    BaselineValue AS baseline_value,
    ObservedValue AS observed_value,
    Score AS score,
    Services AS services,
    Series AS series,
    Findings AS findings,
    Neighbours AS neighbours,
    ExampleTraceIds AS example_trace_ids,
    toUnixTimestamp64Nano(LastDeviationEnd) AS last_deviation_end_ns,
    toUnixTimestamp64Nano(ResolvedAt) AS resolved_at_ns,
    Version AS version"""

INCIDENTS = (
    """
SELECT * FROM (
    SELECT"""
    + INCIDENT_COLUMNS
    + """
    FROM hotspan_incidents
    WHERE {conditions}
    ORDER BY Version DESC
    LIMIT 1 BY Tenant, IncidentId
)
WHERE {latest}
ORDER BY window_start_ns DESC, incident_id
LIMIT {{limit:UInt32}}
"""
)
"""Incidents, each at its newest version (``LIMIT 1 BY`` after ordering by version: correct before any merge and
on a cluster, where versions of one incident may sit on different shards). ``{conditions}`` filter what never
changes (tenant, ID, opening time, series); ``{latest}`` what a later version changes (status, resolution)."""

INCIDENT_FILTERS = {
    "incident_id": "IncidentId = {incident_id:String}",
    "service": "has(Services, {service:String})",
    "metric": "Metric = {metric:String}",
    "end_ns": "Timestamp <= fromUnixTimestamp64Nano({end_ns:Int64})",
}
"""Optional conditions on what never changes in an incident, by parameter name: an ID, a service among those that
deviated, the primary metric, opened by ``end_ns``. (A condition on what changes must go to :data:`LATEST_FILTERS`:
here it would pick an older version instead of dropping the incident.)"""

LATEST_FILTERS = {
    "status": "status = {status:String}",
    "start_ns": "(resolved_at_ns IS NULL OR resolved_at_ns >= {start_ns:Int64})",
}
"""Conditions on an incident's newest version (``{latest}``): its status; still open at ``start_ns`` (with
``end_ns`` among the others: open at some moment of the window)."""
