-- Spans stored before 0022's view existed (an upgrade, or tables an OTel Collector filled) enter the RED
-- rollup once: only while the rollup is still empty, so re-running this after a crash between apply and
-- record adds nothing. Same expressions as 0022.
INSERT INTO hotspan_red_minutes
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
WHERE (SELECT count() FROM hotspan_red_minutes) = 0
GROUP BY Tenant, Timestamp, ServiceName, SpanName, SpanKind
