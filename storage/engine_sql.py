"""SQL of the throughput-latency view: vLLM's ``llm_request`` spans grouped by engine configuration and time
bucket, read from ``otel_traces``. Every value is a bound ``{name:Type}`` parameter; the one read carries
:data:`storage.trace_sql.TENANT_FILTER` and counts each span once (its latest copy, ``argMax(..., Version)`` by
:data:`storage.trace_sql.IDENTITY`).

Where the configuration comes from (``instrumented_stack/engine/config_resource.py`` documents the names): the
engine's resource attributes ``vllm.config.*``, which the stack's emulator sets and real vLLM takes from
``OTEL_RESOURCE_ATTRIBUTES`` (vLLM writes none of its flags itself). The model is ``vllm.config.model``, else
the span's ``gen_ai.response.model`` or ``gen_ai.request.model`` (vLLM v0 wrote the former; v1 writes neither).
Latencies are vLLM's own (``gen_ai.latency.e2e`` and ``gen_ai.latency.time_to_first_token``, **seconds**;
the span's duration when ``e2e`` is missing), output tokens ``gen_ai.usage.completion_tokens`` (vLLM's name)
or ``gen_ai.usage.output_tokens`` (the current GenAI semconv name).
"""

from __future__ import annotations

from storage.trace_sql import IDENTITY, TENANT_FILTER

CONFIG_ATTRIBUTES: dict[str, str] = {
    "max_num_seqs": "vllm.config.max_num_seqs",
    "max_num_batched_tokens": "vllm.config.max_num_batched_tokens",
    "enable_chunked_prefill": "vllm.config.enable_chunked_prefill",
    "enable_prefix_caching": "vllm.config.enable_prefix_caching",
    "tensor_parallel_size": "vllm.config.tensor_parallel_size",
}
"""Result column -> the resource attribute it reads (``''`` when the engine does not report it)."""
MODEL_ATTRIBUTE = "vllm.config.model"
LLM_REQUEST = "llm_request"
"""vLLM's per-request span (``instrumented_stack/engine/vllm_span.py``)."""

_CONFIG_COLUMNS = ",\n        ".join(
    f"Resource['{attribute}'] AS {column}" for column, attribute in CONFIG_ATTRIBUTES.items()
)
_CONFIG_KEYS = ", ".join(["service_name", "model", *CONFIG_ATTRIBUTES])

THROUGHPUT_LATENCY = f"""
SELECT
    {_CONFIG_KEYS},
    {{start_ns:Int64}} + intDiv(start_ns - {{start_ns:Int64}}, {{bucket_ns:Int64}}) * {{bucket_ns:Int64}}
        AS bucket_start_ns,
    count() AS requests,
    sum(output_tokens) AS output_tokens,
    min(start_ns) AS first_start_ns,
    max(end_ns) AS last_end_ns,
    quantilesExactInclusive(0.5, 0.95)(e2e_ns) AS e2e,
    e2e[1] AS e2e_p50_ns,
    e2e[2] AS e2e_p95_ns,
    countIf(has_ttft) AS ttft_requests,
    quantilesExactInclusiveIf(0.5, 0.95)(ttft_ns, has_ttft) AS ttft,
    if(ttft_requests > 0, ttft[1], NULL) AS ttft_p50_ns,
    if(ttft_requests > 0, ttft[2], NULL) AS ttft_p95_ns,
    arraySlice(
        arrayMap(pair -> pair.2, arrayReverseSort(groupArray((e2e_ns, trace_id)))), 1, {{examples:UInt32}}
    ) AS example_trace_ids
FROM (
    SELECT
        ServiceName AS service_name,
        multiIf(
            Resource['{MODEL_ATTRIBUTE}'] != '', Resource['{MODEL_ATTRIBUTE}'],
            Attributes['gen_ai.response.model'] != '', Attributes['gen_ai.response.model'],
            Attributes['gen_ai.request.model']
        ) AS model,
        {_CONFIG_COLUMNS},
        toUnixTimestamp64Nano(Timestamp) AS start_ns,
        start_ns + toInt64(SpanDuration) AS end_ns,
        ifNull(toFloat64OrNull(Attributes['gen_ai.latency.e2e']) * 1e9, toFloat64(SpanDuration)) AS e2e_ns,
        toFloat64OrNull(Attributes['gen_ai.latency.time_to_first_token']) IS NOT NULL AS has_ttft,
        ifNull(toFloat64OrNull(Attributes['gen_ai.latency.time_to_first_token']) * 1e9, 0) AS ttft_ns,
        ifNull(
            toUInt64OrNull(Attributes['gen_ai.usage.completion_tokens']),
            ifNull(toUInt64OrNull(Attributes['gen_ai.usage.output_tokens']), 0)
        ) AS output_tokens,
        TraceId AS trace_id
    FROM (
        SELECT
            ServiceName,
            TraceId,
            Timestamp,
            argMax(ResourceAttributes, Version) AS Resource,
            argMax(SpanAttributes, Version) AS Attributes,
            argMax(Duration, Version) AS SpanDuration
        FROM otel_traces
        WHERE SpanName = {{span_name:String}}
          AND Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}})
          AND Timestamp <= fromUnixTimestamp64Nano({{end_ns:Int64}})
          AND {TENANT_FILTER}
        GROUP BY {IDENTITY}, ServiceName
    )
)
WHERE {{model:String}} = '' OR model = {{model:String}}
GROUP BY {_CONFIG_KEYS}, bucket_start_ns
ORDER BY {_CONFIG_KEYS}, bucket_start_ns
"""
"""Per (engine configuration, bucket) over the ``llm_request`` spans (``span_name``) starting in ``[start_ns,
end_ns]`` (ns), optionally of one ``model`` (``''``: every model): the configuration (``service_name``,
``model``, the :data:`CONFIG_ATTRIBUTES` columns as stored strings, ``''`` when absent), ``bucket_start_ns``
(``start_ns`` plus whole ``bucket_ns`` steps), ``requests``, ``output_tokens``, the first arrival and the last
finish (ns), p50/p95 of e2e and TTFT (ns, exact, linearly interpolated; TTFT null when no span reports it) and
up to ``examples`` trace IDs, slowest request first."""
