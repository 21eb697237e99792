-- The RED rollup counts each span once: only a span's first stored copy (otel_traces.Version = 0, migration
-- 0031), not the later, more complete copies a sender may export again (storage.writer.OnceWriter stores those
-- with Version > 0 and drops exact repeats). Same expressions as 0022 otherwise. MODIFY QUERY swaps the view's
-- query in one step, so no insert falls between an old and a new view; running it again changes nothing.
ALTER TABLE hotspan_red_minutes_mv MODIFY QUERY
SELECT
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
WHERE Version = 0
GROUP BY Tenant, Timestamp, ServiceName, SpanName, SpanKind
