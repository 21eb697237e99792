-- The summaries stored before 0111's view existed enter 0110's table: each trace's latest version, at its start.
-- Rows the view copied meanwhile are the same rows (same key and version), so FINAL reads each once, and running
-- this again after a crash between apply and record changes nothing a read sees.
INSERT INTO hotspan_trace_summary_by_time
SELECT
    Tenant, Timestamp, TraceId, RootSpanId, RootService, RootName, DurationNs, SpanCount, ServiceCount, ErrorCount,
    HotspotCount, RequestTenant, Model, LlmCalls, TtftNs, TpotNs, StageNs, AnalysedSpans, Version, AnalysedAt,
    InputTokens, OutputTokens, CachedInputTokens, ReasoningTokens, Sampled, Enveloped, ParentlessSpans,
    ReattachedSpans, OutlivingSpans, ExtendedSpans, ExtendedNs, ImplausibleRoot, ConversationId,
    toUInt8(0) AS Deleted
FROM hotspan_trace_summary FINAL
