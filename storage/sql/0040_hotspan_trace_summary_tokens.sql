-- Token usage per request (analysis.decomposition.request_summary): input (cached included), output
-- (reasoning included), cached-input and reasoning tokens, summed over the request's generations, each counted
-- once on the innermost model call that reports it (analysis.model_calls). Rows written before this migration
-- read 0 until the trace is analysed again.
ALTER TABLE hotspan_trace_summary
    ADD COLUMN IF NOT EXISTS InputTokens UInt64 DEFAULT 0 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS OutputTokens UInt64 DEFAULT 0 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS CachedInputTokens UInt64 DEFAULT 0 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS ReasoningTokens UInt64 DEFAULT 0 CODEC(T64, ZSTD(1))
