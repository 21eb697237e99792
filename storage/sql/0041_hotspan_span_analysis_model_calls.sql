-- Per span, what a model call reports (analysis.model_calls): Model ('' for spans that are no model call, or
-- that name none); the token counts only on the call where the generation is counted (the innermost call
-- reporting usage), 0 elsewhere, so sums over spans count every generation once; LlmCall: the span is a
-- model call the request made (outermost); TtftNs: the call's time to first token (null when unknown).
ALTER TABLE hotspan_span_analysis
    ADD COLUMN IF NOT EXISTS Model LowCardinality(String) DEFAULT '' CODEC(ZSTD(1)),
    ADD COLUMN IF NOT EXISTS LlmCall Bool DEFAULT false,
    ADD COLUMN IF NOT EXISTS InputTokens UInt64 DEFAULT 0 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS OutputTokens UInt64 DEFAULT 0 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS CachedInputTokens UInt64 DEFAULT 0 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS ReasoningTokens UInt64 DEFAULT 0 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS TtftNs Nullable(UInt64)
