-- llm_request spans stored before 0071's view existed (an upgrade, or tables an OTel Collector filled) enter
-- hotspan_engine_requests once: only while it is still empty, so re-running this after a crash between apply and
-- record adds nothing. Same expressions as 0071.
INSERT INTO hotspan_engine_requests
SELECT
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
  AND (SELECT count() FROM hotspan_engine_requests) = 0
