"""Claude Code's own traces, from the real CLI (``instrumented_stack.realclients.claude_code``): the stored
capture (``captures/claude_code``, Claude Code 2.1.197, three ``claude -p`` turns of four model requests and three
tool calls each on the emulator's Messages API) decomposed as the wire measured it, and, where the CLI is
installed (``$HOTSPAN_CLAUDE_CODE`` or ``claude`` on the PATH; skipped otherwise, with the reason shown), a live
turn checked the same way.

The truth (``capture.truth.json``) is the recording proxy's: each model request from its arrival to the last byte
handed back, and the turn's duration as the CLI reports it. Claude Code's request span also holds its own work
before the request leaves (the ``gen_ai.request.attempt`` event marks the send) and after the stream ends, a few
ms per request that the wire does not count, so the LLM share reads a few points above the truth.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from realworld_kit import roots, spans_from_otlp_json

from analysis import STAGES, analyze, stage_breakdown_wide, wall_clock_breakdown
from analysis.stage_rules import LLM_STAGES
from collector.ingest import Ingestor
from instrumented_stack.realclients.claude_code import capture_turns, find_claude
from instrumented_stack.realclients.otlp_sink import OtlpSink, create_sink_app
from instrumented_stack.serving import ThreadedServer, bind_loopback
from storage.reader import ClickHouseTraceReader
from storage.tenancy import ALL_TENANTS
from testkit import ingest_otlp_json_file

CAPTURE = Path(__file__).parent / "captures" / "claude_code"
SHARE_TOLERANCE = 0.05
INTERACTION, REQUEST = "claude_code.interaction", "claude_code.llm_request"


def _check_shape(capture: dict[str, Any], truth: dict[str, Any]) -> None:
    traces = spans_from_otlp_json(capture)
    # Claude Code sends no traceparent: the engine's spans are traces of their own, one per model request.
    assert truth["traceparent_sent"] == 0
    engine_traces = [spans for spans in traces.values() if {s["name"] for s in spans} == {"llm_request"}]
    assert len(engine_traces) == sum(request["llm_calls"] for request in truth["requests"])
    for request in truth["requests"]:
        spans = traces[request["trace_id"]]
        assert [span["name"] for span in roots(spans)] == [INTERACTION]
        assert {span["attributes"]["session.id"] for span in spans} == {request["session_id"]}
        assert sum(1 for span in spans if span["name"] == REQUEST) == request["llm_calls"] == 4
        assert all("gen_ai.request.attempt" in span["events"] for span in spans if span["name"] == REQUEST)


def _check_analysis(path: Path, truth: dict[str, Any], ingestor: Ingestor, reader: ClickHouseTraceReader) -> None:
    assert all(result.rejected == 0 for result in ingest_otlp_json_file(ingestor, path))
    ids = [request["trace_id"] for request in truth["requests"]]
    analysis = analyze(pl.concat([reader.trace(trace_id, tenant=ALL_TENANTS) for trace_id in ids]))
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
        # Claude Code's bare usage counts are read with the API's meaning: input = uncached + cache reads.
        assert row["input_tokens"] == sum(attempt["prompt_tokens"] for attempt in served), breakdown
        assert row["output_tokens"] == sum(attempt["completion_tokens"] for attempt in served)
        assert row["cached_input_tokens"] == sum(attempt["cached_tokens"] for attempt in served)
        llm_ns += sum(row[f"{stage}_ns"] for stage in LLM_STAGES)
        wall_ns += wall_llm[request["trace_id"]][0]
        e2e_ns += row["duration_ns"]
        truth_llm_ns += request["llm_in_flight_ns"]
        truth_e2e_ns += request["e2e_ns"]
    assert llm_ns / e2e_ns == pytest.approx(truth_llm_ns / truth_e2e_ns, abs=SHARE_TOLERANCE)
    # Both views agree once the calls its tools overlap are adjusted (analysis.early_actions).
    assert wall_ns / e2e_ns == pytest.approx(llm_ns / e2e_ns, abs=0.01)


def test_the_stored_capture_is_claude_codes_own_turns() -> None:
    truth = json.loads((CAPTURE / "capture.truth.json").read_text(encoding="utf-8"))
    assert truth["libraries"] == {"npm:@anthropic-ai/claude-code": "2.1.197"}
    _check_shape(json.loads((CAPTURE / "capture.json").read_text(encoding="utf-8")), truth)


def test_claude_code_turns_decompose_as_the_wire_measured(ingestor: Ingestor, reader: ClickHouseTraceReader) -> None:
    truth = json.loads((CAPTURE / "capture.truth.json").read_text(encoding="utf-8"))
    _check_analysis(CAPTURE / "capture.json", truth, ingestor, reader)


@pytest.mark.skipif(
    find_claude() is None, reason="the claude CLI is not installed (instrumented_stack.realclients.claude_code)"
)
def test_a_live_claude_code_turn_decomposes_as_the_wire_measured(
    ingestor: Ingestor, reader: ClickHouseTraceReader, tmp_path: Path
) -> None:
    claude = find_claude()
    assert claude is not None
    sink = OtlpSink()
    receiver = ThreadedServer(create_sink_app(sink), bind_loopback(), name="otlp-sink")
    receiver.start()
    try:
        result = capture_turns(claude, receiver.url, sink, requests=1)
    finally:
        receiver.stop()
    _check_shape(result.capture, result.truth)
    path = tmp_path / "capture.json"
    path.write_text(json.dumps(result.capture), encoding="utf-8")
    _check_analysis(path, result.truth, ingestor, reader)
