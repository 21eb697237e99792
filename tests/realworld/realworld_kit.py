"""Helpers for the real-instrumentation tests: which spans are whose, trace shape checks, waiting for Hotspan.

Spans are plain dicts with Hotspan's REST field names (``span_id``, ``parent_span_id``, ``name``,
``service_name``, ``scope_name``, ``attributes``); :func:`spans_from_otlp_json` turns a capture file into the
same shape, so live runs and stored captures are checked by the same functions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import polars as pl

from analysis import STAGES, analyze, stage_breakdown_wide, wall_clock_breakdown
from analysis.stage_rules import LLM_STAGES
from collector.ingest import Ingestor
from instrumented_stack.realclients.common import ROOT_SPAN_NAME
from instrumented_stack.realclients.harness import DriverResult
from storage.reader import ClickHouseTraceReader
from storage.tenancy import ALL_TENANTS
from testkit import ingest_otlp_json_file

Span = dict[str, Any]
LiveRun = tuple[DriverResult, dict[str, list[Span]]]
"""A live driver run: its result and each trace's spans as stored in Hotspan."""

CONVENTIONS: dict[str, tuple[str, str | None]] = {
    "openai_v2": ("gen_ai.operation.name", "chat"),
    "openinference_openai": ("openinference.span.kind", "LLM"),
    "openllmetry_openai": ("gen_ai.openai.api_base", None),
    "pydantic_ai": ("gen_ai.operation.name", "invoke_agent"),
    "openai_agents": ("openinference.span.kind", "AGENT"),
    "langgraph": ("traceloop.span.kind", "workflow"),
    "langfuse": ("langfuse.observation.type", "generation"),
    "vercel_ai": ("ai.telemetry.functionId", "support_agent"),
    "agent_framework": ("gen_ai.provider.name", "microsoft.agent_framework"),
    "strands": ("gen_ai.operation.name", "execute_event_loop_cycle"),
    "langsmith": ("langsmith.span.kind", "llm"),
    "logfire": ("logfire.span_type", "span"),
    "google_adk": ("gcp.vertex.agent.invocation_id", None),
    "semantic_kernel": ("sk.available_functions", None),
    "mlflow_tracing": ("mlflow.spanType", '"CHAT_MODEL"'),
    "anthropic_sdk": ("gen_ai.provider.name", "anthropic"),
    "openinference_anthropic": ("llm.provider", "anthropic"),
    "openllmetry_anthropic": ("gen_ai.usage.cache_creation.input_tokens", None),
    "promptflow": ("span_type", "LLM"),
    "ddtrace_llmobs": ("_dd.llmobs.span_kind", "llm"),
}
"""Driver -> an attribute the library itself writes (key, and value when one is expected), as observed."""

LLM_SPAN_NOT_CURRENT = frozenset({"langfuse", "langgraph", "mlflow_tracing", "openllmetry_anthropic"})
"""Drivers whose library does not make its LLM span current while the SDK sends (Langfuse's OpenAI wrapper;
OpenLLMetry's LangChain callback handler and its Anthropic instrumentation; MLflow's OpenAI autolog), so the HTTP
client span, and vLLM's ``llm_request`` under it, is a sibling of the LLM span (under the agent observation / the
graph node), not its descendant (as observed)."""
LLM_SPAN_NOT_CURRENT_STREAMED = frozenset({"openinference_anthropic"})
"""Drivers whose library makes its LLM span current for a plain call but not for a streamed one (OpenInference's
Anthropic instrumentation around ``Messages.stream``), as observed."""

VERCEL_AI_CALLS = frozenset({"ai.generateText.doGenerate", "ai.streamText.doStream"})
"""The Vercel AI SDK's provider-call operations (``ai.operationId``), one per step."""
ENGINE_SPANS_ELSEWHERE = frozenset({"langsmith"})
"""Drivers whose library puts a context of its own around its LLM call (LangSmith's OTel export makes the current
span a non-recording one with IDs derived from its run UUIDs, then exports the run under other IDs), so the HTTP
client span and vLLM's ``llm_request`` below it land in a trace of their own (as observed)."""
LLM_REQUEST = "llm_request"
HTTPX_SCOPE = "opentelemetry.instrumentation.httpx"


def is_llm_call(span: Span) -> bool:
    """A client-side LLM call span, in any of the conventions the drivers' libraries write."""
    attributes = span["attributes"]
    if span["name"] == LLM_REQUEST or span["scope_name"] == HTTPX_SCOPE:
        return False
    if attributes.get("logfire.span_type") == "log":
        # Logfire's zero-length "streaming response ... took {duration}s" record after a streamed call's span.
        return False
    return (
        attributes.get("gen_ai.operation.name") in ("chat", "text_completion", "generate_content", "llm")
        or attributes.get("openinference.span.kind") == "LLM"
        or attributes.get("langfuse.observation.type") == "generation"
        or attributes.get("ai.operationId") in VERCEL_AI_CALLS
        or attributes.get("mlflow.spanType") in ('"CHAT_MODEL"', '"LLM"')
        or (attributes.get("framework"), attributes.get("span_type")) == ("promptflow", "LLM")
    )


def has_convention(spans: list[Span], driver: str) -> bool:
    """Whether the driver's library convention (:data:`CONVENTIONS`) is on some span."""
    key, value = CONVENTIONS[driver]
    return any(key in s["attributes"] and (value is None or s["attributes"][key] == value) for s in spans)


def orphans(spans: list[Span]) -> list[Span]:
    """Spans whose parent is not in the trace."""
    ids = {s["span_id"] for s in spans}
    return [s for s in spans if s["parent_span_id"] and s["parent_span_id"] not in ids]


def ancestors(span: Span, by_id: dict[str, Span]) -> list[Span]:
    """``span``'s ancestors, nearest first."""
    chain: list[Span] = []
    parent = by_id.get(span["parent_span_id"])
    while parent is not None:
        chain.append(parent)
        parent = by_id.get(parent["parent_span_id"])
    return chain


def llm_span_current(driver: str, stream: bool) -> bool:
    """Whether the driver's library makes its LLM span current while the SDK sends, so vLLM's ``llm_request``
    lands under it (:data:`LLM_SPAN_NOT_CURRENT`, :data:`LLM_SPAN_NOT_CURRENT_STREAMED`)."""
    return driver not in LLM_SPAN_NOT_CURRENT and not (stream and driver in LLM_SPAN_NOT_CURRENT_STREAMED)


def engine_spans_under_llm_calls(spans: list[Span]) -> list[bool]:
    """Per ``llm_request`` span: whether a client LLM call span is among its ancestors."""
    by_id = {s["span_id"]: s for s in spans}
    return [any(is_llm_call(a) for a in ancestors(s, by_id)) for s in spans if s["name"] == LLM_REQUEST]


def roots(spans: list[Span]) -> list[Span]:
    """Spans without a parent."""
    return [s for s in spans if not s["parent_span_id"]]


def engine_spans_expected(driver: str, llm_calls: int, engine_spans: bool) -> int:
    """How many ``llm_request`` spans the driver's trace holds: one per LLM call when the engine traces, none when
    it does not or when the library sends them to another trace (:data:`ENGINE_SPANS_ELSEWHERE`)."""
    return llm_calls if engine_spans and driver not in ENGINE_SPANS_ELSEWHERE else 0


def shape_ready(spans: list[Span], engine_expected: int) -> bool:
    """The whole trace has arrived: the driver's root, no orphan, and ``engine_expected`` ``llm_request`` spans."""
    engine = sum(1 for s in spans if s["name"] == LLM_REQUEST)
    root_ok = [s["name"] for s in roots(spans)] == [ROOT_SPAN_NAME]
    return root_ok and not orphans(spans) and engine == engine_expected


def wait_for_trace(
    base_url: str, trace_id: str, ready: Callable[[list[Span]], bool], timeout_s: float = 30
) -> list[Span]:
    """Poll Hotspan's ``GET /api/v1/traces/{id}`` until ``ready(spans)``; return the spans.

    Raises:
        TimeoutError: not ready within ``timeout_s`` seconds (the message gives the last span names).
    """
    deadline = time.monotonic() + timeout_s
    spans: list[Span] = []
    while time.monotonic() < deadline:
        response = httpx.get(f"{base_url}/api/v1/traces/{trace_id}", timeout=10)
        if response.status_code == 200:
            spans = response.json()["spans"]
            if ready(spans):
                return spans
        time.sleep(0.2)
    raise TimeoutError(f"trace {trace_id} not complete: {sorted(s['name'] for s in spans)}")


def spans_from_otlp_json(document: dict[str, Any]) -> dict[str, list[Span]]:
    """A capture's spans by trace id, in the REST API's field names (attribute values as strings)."""
    traces: dict[str, list[Span]] = {}
    for resource_spans in document["resourceSpans"]:
        resource = {a["key"]: _value(a["value"]) for a in resource_spans["resource"].get("attributes", [])}
        for scope_spans in resource_spans["scopeSpans"]:
            scope = scope_spans.get("scope", {}).get("name", "")
            for span in scope_spans["spans"]:
                traces.setdefault(span["traceId"], []).append(
                    {
                        "span_id": span["spanId"],
                        "parent_span_id": span.get("parentSpanId", ""),
                        "name": span["name"],
                        "service_name": resource.get("service.name", ""),
                        "scope_name": scope,
                        "kind": span.get("kind", 0),
                        "attributes": {a["key"]: _value(a["value"]) for a in span.get("attributes", [])},
                        "events": [e["name"] for e in span.get("events", [])],
                        "start_time_unix_nano": int(span["startTimeUnixNano"]),
                        "end_time_unix_nano": int(span["endTimeUnixNano"]),
                    }
                )
    return traces


def _value(value: dict[str, Any]) -> str:
    (kind, raw), *_ = value.items() if value else (("stringValue", ""),)
    return raw if kind == "stringValue" else str(raw)


@dataclass(frozen=True)
class CliShares:
    """A CLI capture's LLM share of end-to-end time, summed over its turns: Hotspan's critical-path view
    (``critical``) and wall-clock view (``wall``), and the wire's (``truth``)."""

    critical: float
    wall: float
    truth: float


def check_cli_capture(
    path: Path, truth: dict[str, Any], ingestor: Ingestor, reader: ClickHouseTraceReader
) -> CliShares:
    """Store a native CLI's capture (``claude_code``, ``codex_cli``) through the real decode path, analyse its
    turns, and hold each against the recording proxy's truth: ``other`` at most 5 % of the turn, as many model
    calls as requests on the wire, and the served requests' input (cache reads included), output and cached
    tokens. Returns the shares for the caller's tolerance."""
    assert all(result.rejected == 0 for result in ingest_otlp_json_file(ingestor, path))
    ids = [request["trace_id"] for request in truth["requests"]]
    analysis = analyze(reader.traces(ids, tenant=ALL_TENANTS).drop("tenant"))
    wide = {row["trace_id"]: row for row in stage_breakdown_wide(analysis).iter_rows(named=True)}
    wall = wall_clock_breakdown(analysis).filter(pl.col("stage").cast(pl.String).is_in(LLM_STAGES))
    wall_llm = wall.group_by("trace_id").agg(pl.col("duration_ns").sum()).rows_by_key("trace_id", unique=True)
    llm_ns = wall_ns = e2e_ns = truth_llm_ns = truth_e2e_ns = 0
    for request in truth["requests"]:
        row = wide[request["trace_id"]]
        breakdown = {stage: round(row[f"{stage}_ns"] / row["duration_ns"], 3) for stage in STAGES if row[f"{stage}_ns"]}
        assert row["other_ns"] <= 0.05 * row["duration_ns"], breakdown
        assert row["llm_calls"] == request["llm_calls"]
        served = [attempt for attempt in request["llm_attempts"] if attempt["status"] == 200]
        assert row["input_tokens"] == sum(attempt["prompt_tokens"] for attempt in served), breakdown
        assert row["output_tokens"] == sum(attempt["completion_tokens"] for attempt in served)
        assert row["cached_input_tokens"] == sum(attempt["cached_tokens"] for attempt in served)
        llm_ns += sum(row[f"{stage}_ns"] for stage in LLM_STAGES)
        wall_ns += wall_llm[request["trace_id"]][0]
        e2e_ns += row["duration_ns"]
        truth_llm_ns += request["llm_in_flight_ns"]
        truth_e2e_ns += request["e2e_ns"]
    return CliShares(llm_ns / e2e_ns, wall_ns / e2e_ns, truth_llm_ns / truth_e2e_ns)
