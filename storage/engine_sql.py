"""SQL of the throughput-latency view: vLLM's requests grouped by engine configuration and time bucket, read from
``hotspan_engine_requests`` (migrations 0070-0072: one row per ``llm_request`` span, filled at ingest, so tail
sampling leaves every request counted). Every value is a bound ``{name:Type}`` parameter; the read carries the
owner-tenant condition (:func:`storage.tenancy.tenant_condition`; the table stores folded tenant names).

Where the configuration comes from (``instrumented_stack/engine/config_resource.py`` documents the names): the
engine's resource attributes ``vllm.config.*``, which the stack's emulator sets and real vLLM takes from
``OTEL_RESOURCE_ATTRIBUTES`` (vLLM writes none of its flags itself); migration 0071 says how the model, latencies
and output tokens are read.
"""

from __future__ import annotations

from storage.tenancy import tenant_condition

CONFIG_COLUMNS: dict[str, str] = {
    "max_num_seqs": "MaxNumSeqs",
    "max_num_batched_tokens": "MaxNumBatchedTokens",
    "enable_chunked_prefill": "EnableChunkedPrefill",
    "enable_prefix_caching": "EnablePrefixCaching",
    "tensor_parallel_size": "TensorParallelSize",
}
"""Result column -> the ``hotspan_engine_requests`` column holding that ``vllm.config.<name>`` resource attribute
(``''`` when the engine does not report it)."""

_KEYS = ", ".join(
    ["ServiceName AS service_name", "Model AS model"] + [f"{c} AS {n}" for n, c in CONFIG_COLUMNS.items()]
)
_KEY_NAMES = ", ".join(["service_name", "model", *CONFIG_COLUMNS])

THROUGHPUT_LATENCY = f"""
SELECT
    {_KEYS},
    {{start_ns:Int64}} + intDiv(toUnixTimestamp64Nano(Timestamp) - {{start_ns:Int64}}, {{bucket_ns:Int64}})
        * {{bucket_ns:Int64}} AS bucket_start_ns,
    count() AS requests,
    sum(OutputTokens) AS output_tokens,
    min(toUnixTimestamp64Nano(Timestamp)) AS first_start_ns,
    max(toUnixTimestamp64Nano(Timestamp) + toInt64(DurationNs)) AS last_end_ns,
    quantilesExactInclusive(0.5, 0.95)(E2eNs) AS e2e,
    e2e[1] AS e2e_p50_ns,
    e2e[2] AS e2e_p95_ns,
    count(TtftNs) AS ttft_requests,
    quantilesExactInclusiveIf(0.5, 0.95)(ifNull(TtftNs, 0), TtftNs IS NOT NULL) AS ttft,
    if(ttft_requests > 0, ttft[1], NULL) AS ttft_p50_ns,
    if(ttft_requests > 0, ttft[2], NULL) AS ttft_p95_ns,
    arraySlice(
        arrayMap(pair -> pair.2, arrayReverseSort(groupArrayIf((E2eNs, TraceId), TraceId NOT IN dropped))),
        1,
        {{examples:UInt32}}
    ) AS example_trace_ids
FROM hotspan_engine_requests
WHERE Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}})
  AND Timestamp <= fromUnixTimestamp64Nano({{end_ns:Int64}})
  AND ({{model:String}} = '' OR Model = {{model:String}})
  AND {tenant_condition()}
GROUP BY {_KEY_NAMES}, bucket_start_ns
ORDER BY {_KEY_NAMES}, bucket_start_ns
"""
"""Per (engine configuration, bucket) over the requests starting in ``[start_ns, end_ns]`` (ns), optionally of one
``model`` (``''``: every model): the configuration (``service_name``, ``model``, the :data:`CONFIG_COLUMNS` as
stored strings), ``bucket_start_ns`` (``start_ns`` plus whole ``bucket_ns`` steps), ``requests``,
``output_tokens``, the first arrival and the last finish (ns), p50/p95 of e2e and TTFT (ns, exact, linearly
interpolated; TTFT null when no span reports it) and up to ``examples`` trace IDs, slowest request first, of
traces whose spans are kept (``dropped``, a ``WITH`` clause: :data:`DROPPED_TRACES`)."""

DROPPED_TRACES = f"""
WITH dropped AS (
    SELECT TraceId
    FROM hotspan_trace_summary_by_time FINAL
    WHERE NOT Sampled
      AND Timestamp >= fromUnixTimestamp64Nano({{start_ns:Int64}}) - INTERVAL 1 HOUR
      AND Timestamp <= fromUnixTimestamp64Nano({{end_ns:Int64}})
      AND {tenant_condition()}
)
"""
"""Traces tail sampling dropped (their spans deleted, ``hotspan_trace_summary.Sampled`` false, migration 0050) that
may hold requests of the window (a request starts at most an hour after its trace): no example link leads to
them."""
