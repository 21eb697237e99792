-- When each trace last received spans, and how many it received in all: the trace pipeline's work list
-- (processors.pipeline). Filled at insert time by 0012's materialized view, so it also tracks spans an OTel
-- Collector writes into otel_traces. One row per (tenant, trace) after merges; readers aggregate (max / sum)
-- anyway. Tenant is the owner tenant of the spans (storage.tenancy, '' folded to 'default'); LastArrival the
-- ClickHouse server's clock at insert (ms); Timestamp the latest span start of the trace (ns), which drives
-- the TTL like every other table's Timestamp.
CREATE TABLE IF NOT EXISTS hotspan_trace_arrivals (
    Tenant LowCardinality(String) CODEC(ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    LastArrival SimpleAggregateFunction(max, DateTime64(3)),
    Spans SimpleAggregateFunction(sum, UInt64),
    Timestamp SimpleAggregateFunction(max, DateTime64(9))
) ENGINE = AggregatingMergeTree
ORDER BY (Tenant, TraceId)
{ttl}
SETTINGS index_granularity = 8192
