"""The MCP server at ``/mcp`` (issue 33), driven by the official SDK's Streamable HTTP client and ``ClientSession``
against a Hotspan served on loopback: the tools and their schemas, and what each answers over the instrumented
stack's own traces.

Input: the stack run with its ``queue_saturation`` fault (``mcp_kit.fault_spans``), the spans posted as one
OTLP/protobuf body to the served Hotspan.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_kit import served_holding, wait_analysed
from mcp_kit import ROWS, call_tool, fault_spans, list_tools, stages_ns, text
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from api.trace_text import ms
from hotspan.server import RunningServer
from testkit import serve_in_process

TOOLS = {
    "search_traces",
    "get_trace",
    "explain_trace",
    "diagnose",
    "top_hotspots",
    "compare_traces",
    "compare_window",
    "service_map",
}
UNITLESS = {"limit", "max_spans", "max_traces", "quantile"}
"""Numeric arguments that are counts or fractions; every other one names its unit."""
UNIT_SUFFIXES = ("_ns", "_ms", "_minutes")
UNKNOWN_TRACE = "0123456789abcdef0123456789abcdef"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stack_spans() -> ExportTraceServiceRequest:
    """One stack run with the fault on, as an OTLP export request."""
    return fault_spans()


@pytest.fixture(scope="module")
def server(
    chdb_dsn: str, layout: str, tmp_path_factory: pytest.TempPathFactory, stack_spans: ExportTraceServiceRequest
) -> Iterator[RunningServer]:
    """A served Hotspan without an auth file (the open ``default`` tenant on loopback) holding the run's spans,
    analysed by its trace pipeline."""
    with served_holding(chdb_dsn, layout, tmp_path_factory.mktemp("mcp"), "mcp", stack_spans) as running:
        wait_analysed(running, stack_spans)
        yield running


@pytest.fixture(scope="module")
def diagnosis(server: RunningServer) -> dict[str, Any]:
    result = call_tool(server.base_url, "diagnose", {})
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    return result.structured_content


def test_the_tools_are_listed_with_their_schemas(server: RunningServer) -> None:
    tools = {tool.name: tool for tool in list_tools(server.base_url)}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.description and tool.annotations is not None and tool.annotations.read_only_hint, name
        properties = tool.input_schema["properties"]
        assert "ctx" not in properties, name
        for argument, schema in properties.items():
            kinds = {option.get("type") for option in schema.get("anyOf", [schema])}
            assert schema.get("description"), (name, argument)
            if kinds & {"integer", "number"} and argument not in UNITLESS:
                assert argument.endswith(UNIT_SUFFIXES), (name, argument)
    assert tools["explain_trace"].input_schema["required"] == ["trace_id"]
    search = tools["search_traces"].input_schema["properties"]
    assert {"service", "operation", "start_ns", "end_ns", "min_duration_ms", "max_duration_ms", "stage"} <= set(search)
    assert "ns since the Unix epoch" in search["start_ns"]["description"]


def test_diagnose_returns_ranked_findings_with_evidence_and_remedies(diagnosis: dict[str, Any]) -> None:
    assert diagnosis["trace_count"] >= ROWS and diagnosis["rule_errors"] == []
    findings = diagnosis["findings"]
    assert findings and findings[0]["cause"] == "queue_saturation" and findings[0]["severity"] == "critical"
    for finding in findings:
        assert finding["remedy"] and finding["evidence"] and "tests" in finding
    assert len(findings[0]["evidence"]["example_trace_ids"]) >= 2


def test_explain_trace_names_the_top_stage_and_the_cause(server: RunningServer, diagnosis: dict[str, Any]) -> None:
    trace_id = diagnosis["findings"][0]["evidence"]["example_trace_ids"][0]
    stages = stages_ns(server, trace_id)
    top = max(stages, key=stages.__getitem__)
    result = call_tool(server.base_url, "explain_trace", {"trace_id": trace_id})
    assert not result.is_error, text(result)
    explanation = text(result)
    assert explanation.startswith(f"Trace {trace_id}:")
    assert f"Top stage: {top}, {ms(stages[top])} ms" in explanation
    assert "1. queue_saturation [critical" in explanation
    assert "one of the finding's example requests" in explanation
    assert f"{ms(stages['llm.queue'])} ms" in explanation.split("1. queue_saturation", 1)[1].splitlines()[1]
    assert "Remedy: " in explanation


def test_get_trace_shows_the_whole_tree_or_says_what_it_cut(server: RunningServer, diagnosis: dict[str, Any]) -> None:
    trace_id = diagnosis["findings"][0]["evidence"]["example_trace_ids"][0]
    spans = httpx.get(f"{server.base_url}/api/v1/traces/{trace_id}", timeout=30).json()["span_count"]
    assert spans > 6
    whole = text(call_tool(server.base_url, "get_trace", {"trace_id": trace_id.upper()}))
    lines = whole.splitlines()
    rows = lines[lines.index(next(line for line in lines if line.startswith("Spans: "))) + 1 :]
    assert len(rows) == spans and "Cut:" not in whole
    assert rows[0].startswith("+0 ") and " * gateway: " in rows[0]
    assert "llm.queue " in whole and "Stages (root's critical path): " in whole
    cut = text(call_tool(server.base_url, "get_trace", {"trace_id": trace_id, "max_spans": 5}))
    assert f"Cut: 5 of {spans} spans shown (max_spans 5)" in cut
    assert "more child span(s) not shown" in cut


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("get_trace", {"trace_id": UNKNOWN_TRACE}, "not_found"),
        ("explain_trace", {"trace_id": UNKNOWN_TRACE}, "not_found"),
        ("compare_traces", {"trace_id_a": UNKNOWN_TRACE, "trace_id_b": UNKNOWN_TRACE}, "not_found"),
        ("get_trace", {"trace_id": "not-a-trace-id"}, "invalid_trace_id"),
        ("diagnose", {"start_ns": 2_000, "end_ns": 1_000}, "invalid_parameter"),
        ("search_traces", {"min_duration_ms": 5, "max_duration_ms": 1}, "invalid_parameter"),
        ("get_trace", {"trace_id": UNKNOWN_TRACE, "max_spans": 0}, "max_spans"),
    ],
)
def test_bad_calls_are_tool_errors(server: RunningServer, tool: str, arguments: dict[str, Any], code: str) -> None:
    result = call_tool(server.base_url, tool, arguments)
    assert result.is_error and code in text(result), text(result)


def test_search_traces_ranks_by_stage_time(server: RunningServer) -> None:
    result = call_tool(server.base_url, "search_traces", {"stage": "llm.queue", "limit": 5})
    assert not result.is_error, text(result)
    traces = result.structured_content["traces"]  # type: ignore[index]
    assert len(traces) == 5
    waits = [trace["stage_ms"] for trace in traces]
    assert waits == sorted(waits, reverse=True) and waits[0] > 0
    for trace in traces:
        assert trace["root"].startswith("gateway: ") and trace["llm_calls"] >= 1 and trace["dominant_stage"]
        assert round(stages_ns(server, trace["trace_id"])["llm.queue"] / 1e6, 3) == trace["stage_ms"]


def test_window_tools_answer_from_the_pipelines_tables(server: RunningServer, diagnosis: dict[str, Any]) -> None:
    hotspots = call_tool(server.base_url, "top_hotspots", {"limit": 5}).structured_content
    assert hotspots is not None and hotspots["by_self_time"]
    top = hotspots["by_self_time"][0]
    assert (top["service"], top["operation"]) == ("vllm", "llm_request") and top["self_total_ms"] > 0
    graph = call_tool(server.base_url, "service_map", {}).structured_content
    assert graph is not None
    assert {"gateway", "agent", "vllm"} <= {service["name"] for service in graph["services"]}
    assert any(edge["caller"] == "gateway" and edge["callee"] == "agent" for edge in graph["edges"])
    window = call_tool(server.base_url, "compare_window", {"quantile": 0.75}).structured_content
    assert window is not None and window["slow_requests"] >= 1 and window["baseline_requests"] >= 1
    assert "llm.queue" in {stage["stage"] for stage in window["stages"]}
    a, b = diagnosis["findings"][0]["evidence"]["example_trace_ids"][:2]
    pair = call_tool(server.base_url, "compare_traces", {"trace_id_a": a, "trace_id_b": b}).structured_content
    assert pair is not None and pair["paths"] and pair["paths"][0]["path"].startswith("gateway:")
    queue = next(stage for stage in pair["stages"] if stage["stage"] == "llm.queue")
    assert queue["a_ms"] > 0 and queue["b_ms"] > 0


def test_a_read_over_its_budget_is_a_tool_error(
    chdb_dsn: str, tmp_path: Path, stack_spans: ExportTraceServiceRequest
) -> None:
    """A window's diagnosis reads its spans within ``HOTSPAN_MAX_SEARCH_SPANS``: past it the store stops the read,
    and the tool says so (the REST API's 413 ``read_too_large``), while a trace read stays within its own bound."""
    server = serve_in_process(chdb_dsn, tmp_path, "mcpbudget", grpc_port=-1, max_search_spans=10)
    try:
        answer = httpx.post(
            f"{server.base_url}/v1/traces",
            content=stack_spans.SerializeToString(),
            headers={"content-type": "application/x-protobuf"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        result = call_tool(server.base_url, "diagnose", {})
        assert result.is_error and "read_too_large" in text(result), text(result)
        trace_id = stack_spans.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()
        trace = call_tool(server.base_url, "get_trace", {"trace_id": trace_id})
        assert not trace.is_error and text(trace).startswith(f"Trace {trace_id}:"), text(trace)
    finally:
        server.stop()


def test_the_sdk_is_loaded_on_the_first_request_only() -> None:
    """Serving costs nothing of the SDK until ``/mcp`` is asked (``api/mcp_endpoint.py``)."""
    code = "import sys, hotspan.server; print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True, timeout=120
    )
    assert loaded.stdout.strip() == "[]"
