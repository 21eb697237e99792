-- Per trace (request), what the trace pipeline (processors.pipeline) derived from it: its root, size, errors,
-- the tenant its spans name (RequestTenant: tenant_id / tenant.id attribute) and its model, TTFT/TPOT, and
-- its end-to-end latency split by stage along the critical path (StageNs values sum to DurationNs; stages
-- with no time are left out of the map). AnalysedSpans is the arrived span count (hotspan_trace_arrivals.Spans)
-- the analysis covered: the pipeline analyses a trace again when more spans have arrived since.
-- ReplacingMergeTree keyed by the owner tenant (storage.tenancy; never '') and the trace alone (root and start
-- may change when late spans arrive), so every version of a trace meets; read with FINAL. Times and
-- durations are ns.
CREATE TABLE IF NOT EXISTS hotspan_trace_summary (
    Tenant LowCardinality(String) CODEC(ZSTD(1)),
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    RootSpanId String CODEC(ZSTD(1)),
    RootService LowCardinality(String) CODEC(ZSTD(1)),
    RootName LowCardinality(String) CODEC(ZSTD(1)),
    DurationNs UInt64 CODEC(T64, ZSTD(1)),
    SpanCount UInt32,
    ServiceCount UInt32,
    ErrorCount UInt32,
    HotspotCount UInt32,
    RequestTenant LowCardinality(String) CODEC(ZSTD(1)),
    Model LowCardinality(String) CODEC(ZSTD(1)),
    LlmCalls UInt32,
    TtftNs Nullable(UInt64),
    TpotNs Nullable(Float64),
    StageNs Map(LowCardinality(String), UInt64) CODEC(ZSTD(1)),
    AnalysedSpans UInt64,
    Version UInt64,
    AnalysedAt DateTime64(3) DEFAULT now64(3)
) ENGINE = ReplacingMergeTree(Version)
ORDER BY (Tenant, TraceId)
{ttl}
SETTINGS index_granularity = 8192
