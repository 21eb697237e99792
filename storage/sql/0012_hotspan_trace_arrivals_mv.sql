-- Feeds hotspan_trace_arrivals from every insert into otel_traces (Hotspan's writer or an OTel Collector's
-- ClickHouse exporter). now64(3) is evaluated once per insert, so every trace of a batch gets the same
-- arrival time. An insert that otel_traces deduplicates (a replayed spool segment) does not reach the view,
-- so retried batches are not counted twice. Tenant '' (rows without one) is the tenant 'default'
-- (storage.tenancy.DEFAULT_TENANT).
CREATE MATERIALIZED VIEW IF NOT EXISTS hotspan_trace_arrivals_mv
TO hotspan_trace_arrivals
AS SELECT
    if(Tenant = '', 'default', Tenant) AS Tenant,
    TraceId,
    max(now64(3)) AS LastArrival,
    count() AS Spans,
    max(Timestamp) AS Timestamp
FROM otel_traces
WHERE TraceId != ''
GROUP BY Tenant, TraceId
