-- RED rollup: per minute and (service, operation, span kind), calls, errors and duration. Filled at ingest by
-- 0022's materialized view, so a day of RED for every operation is one small read. Durations are ns.
-- DurationBuckets counts spans per upper bound in ms (the OTel spanmetrics connector's default buckets,
-- storage.rollup_sql.SPAN_BUCKETS_MS; 4294967295 stands for +Inf), so the share of spans slower than an SLO
-- threshold comes out exactly as Prometheus computes it from traces_span_metrics_duration_milliseconds_bucket.
-- Tenant is stored folded ('' → 'default', storage.tenancy), so reads compare it directly.
CREATE TABLE IF NOT EXISTS hotspan_red_minutes (
    Tenant LowCardinality(String) CODEC(ZSTD(1)),
    Timestamp DateTime CODEC(Delta(4), ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    Calls SimpleAggregateFunction(sum, UInt64),
    Errors SimpleAggregateFunction(sum, UInt64),
    DurationSum SimpleAggregateFunction(sum, UInt64),
    DurationMax SimpleAggregateFunction(max, UInt64),
    DurationQuantiles AggregateFunction(quantiles(0.5, 0.95, 0.99), UInt64),
    DurationBuckets SimpleAggregateFunction(sumMap, Map(UInt32, UInt64))
) ENGINE = AggregatingMergeTree
PARTITION BY toDate(Timestamp)
ORDER BY (Tenant, ServiceName, SpanName, SpanKind, Timestamp)
{ttl}
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
