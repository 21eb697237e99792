-- Feeds hotspan_engine_requests from every insert into otel_traces: vLLM's llm_request spans, first stored copy
-- only (Version = 0, as the RED rollup counts, migration 0032), so a re-sent span counts once. The model is the
-- engine's vllm.config.model, else the span's gen_ai.response.model (vLLM v0) or gen_ai.request.model; e2e is
-- vLLM's gen_ai.latency.e2e (the span's duration when missing); output tokens gen_ai.usage.completion_tokens
-- (vLLM's name) or gen_ai.usage.output_tokens (GenAI semconv). An insert otel_traces deduplicates does not reach
-- the view.
CREATE MATERIALIZED VIEW IF NOT EXISTS hotspan_engine_requests_mv
TO hotspan_engine_requests
AS SELECT
    if(Tenant = '', 'default', Tenant) AS Tenant,
    Timestamp,
    TraceId,
    ServiceName,
    multiIf(
        ResourceAttributes['vllm.config.model'] != '', ResourceAttributes['vllm.config.model'],
        SpanAttributes['gen_ai.response.model'] != '', SpanAttributes['gen_ai.response.model'],
        SpanAttributes['gen_ai.request.model']
    ) AS Model,
    ResourceAttributes['vllm.config.max_num_seqs'] AS MaxNumSeqs,
    ResourceAttributes['vllm.config.max_num_batched_tokens'] AS MaxNumBatchedTokens,
    ResourceAttributes['vllm.config.enable_chunked_prefill'] AS EnableChunkedPrefill,
    ResourceAttributes['vllm.config.enable_prefix_caching'] AS EnablePrefixCaching,
    ResourceAttributes['vllm.config.tensor_parallel_size'] AS TensorParallelSize,
    Duration AS DurationNs,
    ifNull(toFloat64OrNull(SpanAttributes['gen_ai.latency.e2e']) * 1e9, toFloat64(Duration)) AS E2eNs,
    toFloat64OrNull(SpanAttributes['gen_ai.latency.time_to_first_token']) * 1e9 AS TtftNs,
    ifNull(
        toUInt64OrNull(SpanAttributes['gen_ai.usage.completion_tokens']),
        ifNull(toUInt64OrNull(SpanAttributes['gen_ai.usage.output_tokens']), 0)
    ) AS OutputTokens
FROM otel_traces
WHERE SpanName = 'llm_request' AND Version = 0
