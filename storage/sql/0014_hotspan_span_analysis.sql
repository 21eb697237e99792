-- Per span, what the trace pipeline (processors.pipeline) derived from its whole trace: stage, self time,
-- its part of the critical path, its node in the aggregated flame graph, and its hotspot flag.
-- One row per (span, analysis version): a trace analysed again after late spans writes every span again
-- with a higher Version, and ReplacingMergeTree keeps the newest; read with FINAL. The sorting key holds only
-- what never changes for a span, and the partition is the span's own start day, so versions of one span
-- always meet. Tenant is the owner tenant of the spans (storage.tenancy; never ''), RequestTenant the tenant
-- the request's own spans name (tenant_id / tenant.id attribute). Times and durations are ns unless the name
-- says otherwise.
CREATE TABLE IF NOT EXISTS hotspan_span_analysis (
    Tenant LowCardinality(String) CODEC(ZSTD(1)),
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    Stage LowCardinality(String) CODEC(ZSTD(1)),
    DurationNs UInt64 CODEC(T64, ZSTD(1)),
    SelfTimeNs UInt64 CODEC(T64, ZSTD(1)),
    OnCriticalPath Bool,
    CriticalPathNs UInt64 CODEC(T64, ZSTD(1)),
    Depth UInt32 CODEC(T64, ZSTD(1)),
    FlameNode UInt64 CODEC(ZSTD(1)),
    FlameParent UInt64 CODEC(ZSTD(1)),
    IsError Bool,
    RequestTenant LowCardinality(String) CODEC(ZSTD(1)),
    IsHotspot Bool,
    HotspotReason LowCardinality(String) CODEC(ZSTD(1)),
    HotspotThresholdMs Nullable(Float64),
    Version UInt64,
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1
) ENGINE = ReplacingMergeTree(Version)
PARTITION BY toDate(Timestamp)
ORDER BY (Tenant, ServiceName, SpanName, toDateTime(Timestamp), TraceId, SpanId)
{ttl}
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
