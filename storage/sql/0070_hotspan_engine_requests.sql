-- One row per vLLM request (its llm_request span), with the engine configuration it ran under: the
-- throughput-latency view (query/throughput_latency.py) groups these by configuration and time bucket. Filled at
-- ingest by 0071's materialized view, like the RED rollup, so tail sampling, which deletes dropped traces' spans
-- from otel_traces after their analysis, leaves every request counted. Config columns hold the engine's
-- vllm.config.* resource attributes as stored ('' when the engine does not report one;
-- instrumented_stack/engine/config_resource.py names them). Times are ns; E2eNs and TtftNs come from vLLM's
-- gen_ai.latency.* seconds (TtftNs null when the span has none). Tenant is stored folded ('' → 'default').
CREATE TABLE IF NOT EXISTS hotspan_engine_requests (
    Tenant LowCardinality(String) CODEC(ZSTD(1)),
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    Model LowCardinality(String) CODEC(ZSTD(1)),
    MaxNumSeqs LowCardinality(String) CODEC(ZSTD(1)),
    MaxNumBatchedTokens LowCardinality(String) CODEC(ZSTD(1)),
    EnableChunkedPrefill LowCardinality(String) CODEC(ZSTD(1)),
    EnablePrefixCaching LowCardinality(String) CODEC(ZSTD(1)),
    TensorParallelSize LowCardinality(String) CODEC(ZSTD(1)),
    DurationNs UInt64 CODEC(T64, ZSTD(1)),
    E2eNs Float64 CODEC(ZSTD(1)),
    TtftNs Nullable(Float64) CODEC(ZSTD(1)),
    OutputTokens UInt64 CODEC(T64, ZSTD(1))
) ENGINE = MergeTree
PARTITION BY toDate(Timestamp)
ORDER BY (Tenant, ServiceName, Model, Timestamp)
{ttl}
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
