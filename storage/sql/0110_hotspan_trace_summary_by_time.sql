-- The request summaries sorted by start within a tenant, for every read of a window of requests (stage and latency
-- percentiles, the anomaly detector's series, stage SLOs). hotspan_trace_summary is sorted by (tenant, trace ID) so
-- that every version of a trace meets in FINAL; an hour of requests then lies in every granule, and at 10M requests
-- (100M spans) an hour's stage percentiles read the whole StageNs column (3.2 s). A projection sorted by time cannot
-- serve: ClickHouse reads no projection under FINAL. So this table holds the same rows, keyed by (tenant, start,
-- trace): each version of a trace whose start stays put replaces the last, and when an analysis moves a trace's start
-- (a late root, spans that started earlier) the store first writes a deletion row (Deleted = 1) at the old key with
-- the new version (storage.analysis_store.retractions), so FINAL over a window holds each trace once, at its latest
-- start (merges keep a deletion row, its key and version only, until the TTL removes it with its day). Same columns
-- as hotspan_trace_summary (0015, 0040, 0050, 0080, 0090; tests/storage/test_summary_by_time.py holds them equal),
-- filled by 0111's view. Times and durations are ns.
CREATE TABLE IF NOT EXISTS hotspan_trace_summary_by_time (
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
    AnalysedAt DateTime64(3) DEFAULT now64(3),
    InputTokens UInt64 DEFAULT 0 CODEC(T64, ZSTD(1)),
    OutputTokens UInt64 DEFAULT 0 CODEC(T64, ZSTD(1)),
    CachedInputTokens UInt64 DEFAULT 0 CODEC(T64, ZSTD(1)),
    ReasoningTokens UInt64 DEFAULT 0 CODEC(T64, ZSTD(1)),
    Sampled Bool DEFAULT true,
    Enveloped Bool DEFAULT false,
    ParentlessSpans UInt32 DEFAULT 0,
    ReattachedSpans UInt32 DEFAULT 0,
    OutlivingSpans UInt32 DEFAULT 0,
    ExtendedSpans UInt32 DEFAULT 0,
    ExtendedNs UInt64 DEFAULT 0 CODEC(T64, ZSTD(1)),
    ImplausibleRoot Bool DEFAULT false,
    ConversationId String DEFAULT '' CODEC(ZSTD(1)),
    Deleted UInt8 DEFAULT 0
) ENGINE = ReplacingMergeTree(Version, Deleted)
ORDER BY (Tenant, Timestamp, TraceId)
{ttl}
SETTINGS index_granularity = 8192
