-- Copies every row written to hotspan_trace_summary (the pipeline's summaries, their refreshes) into 0110's table
-- sorted by time, in the same insert. The deletion rows for moved starts are the store's own inserts, not this view's.
CREATE MATERIALIZED VIEW IF NOT EXISTS hotspan_trace_summary_by_time_mv
TO hotspan_trace_summary_by_time
AS SELECT
    Tenant, Timestamp, TraceId, RootSpanId, RootService, RootName, DurationNs, SpanCount, ServiceCount, ErrorCount,
    HotspotCount, RequestTenant, Model, LlmCalls, TtftNs, TpotNs, StageNs, AnalysedSpans, Version, AnalysedAt,
    InputTokens, OutputTokens, CachedInputTokens, ReasoningTokens, Sampled, Enveloped, ParentlessSpans,
    ReattachedSpans, OutlivingSpans, ExtendedSpans, ExtendedNs, ImplausibleRoot, ConversationId,
    toUInt8(0) AS Deleted
FROM hotspan_trace_summary
