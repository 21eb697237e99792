-- Feeds hotspan_red_minutes from every insert into otel_traces (Hotspan's writer, or an OTel Collector's
-- ClickHouse exporter writing into this database). Kinds and status codes of both spellings the exporter has
-- written are folded to `Server`/`Error`. An insert that otel_traces deduplicates (a replayed spool segment)
-- does not reach the view, so retried batches are not counted twice. Tenant comes from otel_traces.Tenant
-- (added by 0011, before this view), folded like every derived table: '' → 'default'.
CREATE MATERIALIZED VIEW IF NOT EXISTS hotspan_red_minutes_mv
TO hotspan_red_minutes
AS SELECT
    if(Tenant = '', 'default', Tenant) AS Tenant,
    toStartOfMinute(Timestamp) AS Timestamp,
    ServiceName,
    SpanName,
    initcap(replaceRegexpOne(SpanKind, '^SPAN_KIND_', '')) AS SpanKind,
    count() AS Calls,
    countIf(initcap(replaceRegexpOne(StatusCode, '^STATUS_CODE_', '')) = 'Error') AS Errors,
    sum(Duration) AS DurationSum,
    max(Duration) AS DurationMax,
    quantilesState(0.5, 0.95, 0.99)(Duration) AS DurationQuantiles,
    sumMap(map(
        toUInt32(arrayFirst(b -> Duration <= toUInt64(b) * 1000000,
            [2, 4, 6, 8, 10, 50, 100, 200, 400, 800, 1000, 1400, 2000, 5000, 10000, 15000, 4294967295])),
        toUInt64(1)
    )) AS DurationBuckets
FROM otel_traces
GROUP BY Tenant, Timestamp, ServiceName, SpanName, SpanKind
