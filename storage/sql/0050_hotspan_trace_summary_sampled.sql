-- The tail-sampling decision of each trace (processors.pipeline.tail_sampling): true when its spans are kept in
-- otel_traces, false when they were deleted after the analysis (RED rollups had counted them at insert, the
-- service graph and span metrics at the analysis). A dropped trace keeps this summary, so request-level
-- aggregates (stage and latency percentiles, tokens, cost) still cover every request, and the summary carries
-- the decision that late spans of the trace follow. Rows written before this migration, or with tail sampling
-- off, are kept traces.
ALTER TABLE hotspan_trace_summary ADD COLUMN IF NOT EXISTS Sampled Bool DEFAULT true
