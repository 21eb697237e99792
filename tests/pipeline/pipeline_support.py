"""Hand-built traces for the pipeline and analysis-API tests, as OTLP/JSON requests, and helpers to store and
analyse them.

Times are written in milliseconds after an origin ``t0_ns`` so the worked answers in the tests read as plain
numbers; they travel as OTLP ``*UnixNano`` strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import polars as pl

from analysis.spans import ATTRIBUTES
from collector.ingest import Ingestor
from collector.otlp_json import request_from_json
from storage.tenancy import DEFAULT_TENANT
from units import NS_PER_MS as MS

T0 = 1_750_000_000_000_000_000
"""2025-06-15T15:06:40Z: origin of the hand-built traces, far from the shared captures (2024)."""

Value = str | int | float | bool
KINDS = {"Internal": 1, "Server": 2, "Client": 3, "Producer": 4, "Consumer": 5}


@dataclass(frozen=True)
class Span:
    """One hand-written span; ``start_ms``/``end_ms`` after the trace's origin."""

    span_id: str
    parent: str
    service: str
    name: str
    start_ms: float
    end_ms: float
    kind: str = "Internal"
    attributes: Mapping[str, Value] = field(default_factory=dict)
    error: bool = False


def _value(value: Value) -> dict[str, object]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": value}


Request = dict[str, list[dict[str, object]]]


def otlp_request(trace_id: str, spans: Iterable[Span], t0_ns: int = T0) -> Request:
    """An OTLP/JSON ``ExportTraceServiceRequest`` holding ``spans`` of trace ``trace_id``, one resource per
    service."""
    by_service: dict[str, list[dict[str, object]]] = {}
    for span in spans:
        by_service.setdefault(span.service, []).append(
            {
                "traceId": trace_id,
                "spanId": span.span_id,
                "parentSpanId": span.parent,
                "name": span.name,
                "kind": KINDS[span.kind],
                "startTimeUnixNano": str(t0_ns + round(span.start_ms * MS)),
                "endTimeUnixNano": str(t0_ns + round(span.end_ms * MS)),
                "attributes": [{"key": k, "value": _value(v)} for k, v in span.attributes.items()],
                "status": {"code": 2} if span.error else {},
            }
        )
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                "scopeSpans": [{"scope": {"name": "hand-built"}, "spans": items}],
            }
            for service, items in by_service.items()
        ]
    }


def store_spans(
    ingestor: Ingestor, trace_id: str, spans: Iterable[Span], t0_ns: int = T0, *, tenant: str = DEFAULT_TENANT
) -> None:
    """Store ``spans`` under owner ``tenant`` through the collector's real decode and validation path; fails on
    any rejection."""
    store_requests(ingestor, [otlp_request(trace_id, spans, t0_ns)], tenant=tenant)


def store_requests(ingestor: Ingestor, requests: Iterable[dict[str, object]], *, tenant: str = DEFAULT_TENANT) -> None:
    """Store several :func:`otlp_request` bodies as one export (one insert)."""
    merged = {"resourceSpans": [rs for request in requests for rs in request["resourceSpans"]]}  # type: ignore[attr-defined]
    request, rejections = request_from_json(merged)
    result = ingestor.export(request, rejections, tenant)
    assert result.rejected == 0, result.error_message


def vllm_agent_trace(
    *,
    queue_ms: float,
    prefill_ms: float,
    decode_ms: float,
    completion_tokens: int,
    tenant: str,
    model: str = "llama-3-8b",
) -> list[Span]:
    """gateway → agent → (vector search, LLM client → vLLM ``llm_request``), durations in ms:

    ==============================  ===============================  =========================================
    span                            interval (ms after the origin)   stage
    ==============================  ===============================  =========================================
    g  gateway ``POST /chat``       0 .. L + 200                     gateway (its service name)
    a  agent ``invoke_agent``       10 .. L + 190                    agent (``gen_ai.operation.name``)
    r  agent ``vector search``      20 .. 120                        retrieval (``db.system=qdrant``)
    c  agent ``chat <model>``       130 .. L + 150                   network (LLM client with a child)
    v  vllm ``llm_request``         140 .. L + 140                   split: queue, prefill, decode
    ==============================  ===============================  =========================================

    with ``L = queue + prefill + decode`` (the vLLM span's duration; TTFT = queue + prefill, so no tokenize or
    detokenize time). Along the critical path: gateway 10 + 10 = 20, agent 10 + 10 + 40 = 60, retrieval 100,
    network 10 + 10 = 20, then queue, prefill, decode: total ``L + 200`` ms, the gateway's duration.
    """
    total = queue_ms + prefill_ms + decode_ms
    seconds = {
        "gen_ai.latency.time_in_queue": queue_ms / 1000,
        "gen_ai.latency.time_in_model_prefill": prefill_ms / 1000,
        "gen_ai.latency.time_in_model_decode": decode_ms / 1000,
        "gen_ai.latency.time_to_first_token": (queue_ms + prefill_ms) / 1000,
    }
    return [
        Span("0000000000000001", "", "gateway", "POST /chat", 0, total + 200, "Server", {"tenant_id": tenant}),
        Span(
            "0000000000000002",
            "0000000000000001",
            "agent",
            "invoke_agent",
            10,
            total + 190,
            attributes={"gen_ai.operation.name": "invoke_agent"},
        ),
        Span(
            "0000000000000003", "0000000000000002", "agent", "vector search", 20, 120, "Client", {"db.system": "qdrant"}
        ),
        Span(
            "0000000000000004",
            "0000000000000002",
            "agent",
            f"chat {model}",
            130,
            total + 150,
            "Client",
            {"gen_ai.operation.name": "chat", "gen_ai.request.model": model},
        ),
        Span(
            "0000000000000005",
            "0000000000000004",
            "vllm",
            "llm_request",
            140,
            total + 140,
            "Server",
            {**seconds, "gen_ai.request.model": model, "gen_ai.usage.completion_tokens": completion_tokens},
        ),
    ]


def span_frame(traces: Mapping[str, Iterable[Span]]) -> pl.DataFrame:
    """The spans of several traces as an analysis span frame (``analysis.spans``), attributes as strings."""
    rows = [(trace_id, span) for trace_id, spans in traces.items() for span in spans]
    return pl.DataFrame(
        {
            "trace_id": [trace_id for trace_id, _ in rows],
            "span_id": [span.span_id for _, span in rows],
            "parent_span_id": [span.parent for _, span in rows],
            "name": [span.name for _, span in rows],
            "service_name": [span.service for _, span in rows],
            "kind": [span.kind for _, span in rows],
            "start_time_unix_nano": [T0 + round(span.start_ms * MS) for _, span in rows],
            "end_time_unix_nano": [T0 + round(span.end_ms * MS) for _, span in rows],
            "attributes": pl.Series(
                [{k: str(v) for k, v in span.attributes.items()} for _, span in rows], dtype=ATTRIBUTES
            ),
        },
        schema_overrides={"start_time_unix_nano": pl.Int64, "end_time_unix_nano": pl.Int64},
    )
