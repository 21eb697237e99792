"""One large agent trace of any size, generated columnar and written straight to ``otel_traces``: the UI tests'
and ``benchmarks/ui.py``'s 10k to 1M-span traces.

The trace is a long-running agent request served by vLLM::

    gateway  POST /v1/agent (Server)
      agent  invoke_agent planner (Internal)
        agent  agent.step (Internal)                          x steps, one after another
          agent  chat llama-3-8b (Client, gen_ai.* tokens)
            vllm llm_request (Server, gen_ai.latency.*: queue, prefill, decode)
          agent  execute_tool search (Internal)
            db   SELECT documents (Client, db.system=postgresql)  x queries, one after another
          agent  parse_output (Internal)

so it has repeated siblings at two levels (the steps, the queries), a vLLM span to split into its phases,
untraced time in every step (the gaps between its children) and about 5 + ``queries`` spans per step.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from storage.schema import SPAN_SCHEMA
from units import NS_PER_MS

T0_NS = 1_735_000_000_000_000_000
"""The trace's start (2024-12-24), ns since the epoch."""
SPANS_PER_STEP_BESIDE_QUERIES = 5


def agent_trace(spans: int, *, trace_id: str = "5ca1ab1e" * 4, queries: int = 15, seed: int = 7) -> pa.Table:
    """About ``spans`` spans (two plus whole steps of ``5 + queries`` spans) of one trace as a
    :data:`storage.schema.SPAN_SCHEMA` table, ready for ``ClickHouseTraceWriter.write``.

    Span IDs are ``<8 hex of the step><8 hex of the slot>``, so they are unique and say where a span sits.
    """
    rng = np.random.default_rng(seed)
    per_step = SPANS_PER_STEP_BESIDE_QUERIES + queries
    steps = max(1, (spans - 2) // per_step)
    step_index = np.arange(steps, dtype=np.int64)

    llm_ns = (rng.lognormal(np.log(400), 0.4, steps) * NS_PER_MS).astype(np.int64)
    queue_ns = (llm_ns * rng.uniform(0.02, 0.3, steps)).astype(np.int64)
    prefill_ns = (llm_ns * 0.15).astype(np.int64)
    query_ns = (rng.lognormal(np.log(3), 0.6, (steps, queries)) * NS_PER_MS).astype(np.int64)
    tool_ns = query_ns.sum(axis=1) + queries * 200_000 + 300_000
    parse_ns = np.full(steps, NS_PER_MS, dtype=np.int64)
    step_ns = 500_000 + llm_ns + 1_000_000 + tool_ns + 2_000_000 + parse_ns + 200_000
    step_start = T0_NS + 2 * NS_PER_MS + np.r_[0, np.cumsum(step_ns + 300_000)[:-1]]

    chat_start = step_start + 500_000
    vllm_start = chat_start + 300_000
    vllm_ns = llm_ns - 600_000
    tool_start = chat_start + llm_ns + 1_000_000
    query_gap = 200_000
    query_start = tool_start[:, None] + 300_000 + np.cumsum(query_ns + query_gap, axis=1) - query_ns - query_gap
    parse_start = tool_start + tool_ns + 2_000_000

    def ids(slot: int | np.ndarray) -> np.ndarray:
        return np.char.add(np.char.mod("%08x", step_index[:, None] + 1), np.char.mod("%08x", slot)).ravel()

    root_id, agent_id = "00000000000000a1", "00000000000000a2"
    step_ids = ids(np.array([1]))
    total_ns = int(step_start[-1] + step_ns[-1] - T0_NS + NS_PER_MS)

    columns: dict[str, list[np.ndarray]] = {name: [] for name in ("id", "parent", "name", "service", "kind")}
    columns |= {"start": [], "duration": []}
    attributes: list[list[dict[str, str]]] = []

    def add(
        span_ids: np.ndarray,
        parents: np.ndarray,
        name: str,
        service: str,
        kind: str,
        start: np.ndarray,
        duration: np.ndarray,
        attrs: list[dict[str, str]] | None = None,
    ) -> None:
        count = span_ids.size
        columns["id"].append(span_ids)
        columns["parent"].append(parents)
        columns["name"].append(np.full(count, name, dtype=object))
        columns["service"].append(np.full(count, service, dtype=object))
        columns["kind"].append(np.full(count, kind, dtype=object))
        columns["start"].append(np.asarray(start, dtype=np.int64).ravel())
        columns["duration"].append(np.asarray(duration, dtype=np.int64).ravel())
        attributes.append(attrs if attrs is not None else [{}] * count)

    add(np.array([root_id]), np.array([""]), "POST /v1/agent", "gateway", "Server", [T0_NS], [total_ns])
    add(np.array([agent_id]), np.array([root_id]), "invoke_agent planner", "agent", "Internal",
        [T0_NS + NS_PER_MS], [total_ns - 2 * NS_PER_MS])  # fmt: skip
    add(step_ids, np.full(steps, agent_id), "agent.step", "agent", "Internal", step_start, step_ns)
    input_tokens = rng.integers(200, 4000, steps)
    output_tokens = rng.integers(20, 600, steps)
    chat_attributes = [
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "llama-3-8b",
            "gen_ai.usage.input_tokens": str(int(i)),
            "gen_ai.usage.output_tokens": str(int(o)),
        }
        for i, o in zip(input_tokens, output_tokens, strict=True)
    ]
    add(ids(np.array([2])), step_ids, "chat llama-3-8b", "agent", "Client", chat_start, llm_ns, chat_attributes)
    vllm_attributes = [
        {
            "gen_ai.request.model": "llama-3-8b",
            "gen_ai.usage.prompt_tokens": str(int(i)),
            "gen_ai.usage.completion_tokens": str(int(o)),
            "gen_ai.latency.time_in_queue": f"{q / 1e9:.9f}",
            "gen_ai.latency.time_in_model_prefill": f"{p / 1e9:.9f}",
            "gen_ai.latency.time_in_model_decode": f"{(v - q - p - 200_000) / 1e9:.9f}",
            "gen_ai.latency.time_to_first_token": f"{(q + p + 100_000) / 1e9:.9f}",
        }
        for i, o, q, p, v in zip(input_tokens, output_tokens, queue_ns, prefill_ns, vllm_ns, strict=True)
    ]
    add(ids(np.array([3])), ids(np.array([2])), "llm_request", "vllm", "Server", vllm_start, vllm_ns, vllm_attributes)
    tool_ids = ids(np.array([4]))
    add(tool_ids, step_ids, "execute_tool search", "agent", "Internal", tool_start, tool_ns)
    query_ids = ids(np.arange(queries) + 16)
    query_attributes = [{"db.system": "postgresql", "db.statement": "SELECT * FROM documents WHERE id = $1"}]
    add(query_ids, np.repeat(tool_ids, queries), "SELECT documents", "postgres", "Client", query_start, query_ns,
        query_attributes * query_ids.size)  # fmt: skip
    add(ids(np.array([5])), step_ids, "parse_output", "agent", "Internal", parse_start, parse_ns)

    span_ids = np.concatenate(columns["id"]).astype(str)
    start = np.concatenate(columns["start"])
    count = span_ids.size
    flat_attributes = [item for chunk in attributes for item in chunk]
    empty_lists = pa.array([[]] * count, type=pa.list_(pa.string()))
    return pa.table(
        {
            "Timestamp": pa.array(start, type=pa.timestamp("ns")),
            "TraceId": pa.array([trace_id] * count, type=pa.string()),
            "SpanId": pa.array(span_ids, type=pa.string()),
            "ParentSpanId": pa.array(np.concatenate(columns["parent"]).astype(str), type=pa.string()),
            "TraceState": pa.array([""] * count, type=pa.string()),
            "SpanName": pa.array(np.concatenate(columns["name"]), type=pa.string()),
            "SpanKind": pa.array(np.concatenate(columns["kind"]), type=pa.string()),
            "ServiceName": pa.array(np.concatenate(columns["service"]), type=pa.string()),
            "ResourceAttributes": pa.array([[]] * count, type=SPAN_SCHEMA.field("ResourceAttributes").type),
            "ScopeName": pa.array([""] * count, type=pa.string()),
            "ScopeVersion": pa.array([""] * count, type=pa.string()),
            "SpanAttributes": pa.array(
                [list(a.items()) for a in flat_attributes], type=SPAN_SCHEMA.field("SpanAttributes").type
            ),
            "Duration": pa.array(np.concatenate(columns["duration"]).astype(np.uint64), type=pa.uint64()),
            "StatusCode": pa.array(["Unset"] * count, type=pa.string()),
            "StatusMessage": pa.array([""] * count, type=pa.string()),
            "Events.Timestamp": pa.array([[]] * count, type=pa.list_(pa.timestamp("ns"))),
            "Events.Name": empty_lists,
            "Events.Attributes": pa.array([[]] * count, type=SPAN_SCHEMA.field("Events.Attributes").type),
            "Links.TraceId": empty_lists,
            "Links.SpanId": empty_lists,
            "Links.TraceState": empty_lists,
            "Links.Attributes": pa.array([[]] * count, type=SPAN_SCHEMA.field("Links.Attributes").type),
        },
        schema=SPAN_SCHEMA,
    )
