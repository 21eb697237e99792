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

import pytest
from realworld_kit import check_cli_capture, roots, spans_from_otlp_json

from collector.ingest import Ingestor
from instrumented_stack.realclients.claude_code import capture_turns, find_claude
from instrumented_stack.realclients.cli_capture import run_with_sink
from storage.reader import ClickHouseTraceReader

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
    # Claude Code's bare usage counts are read with the API's meaning: input = uncached + cache reads.
    shares = check_cli_capture(path, truth, ingestor, reader)
    assert shares.critical == pytest.approx(shares.truth, abs=SHARE_TOLERANCE)
    # Both views agree once the calls its tools overlap are adjusted (analysis.early_actions).
    assert shares.wall == pytest.approx(shares.critical, abs=0.01)


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
    result = run_with_sink(lambda endpoint, sink: capture_turns(claude, endpoint, sink, requests=1))
    _check_shape(result.capture, result.truth)
    path = tmp_path / "capture.json"
    path.write_text(json.dumps(result.capture), encoding="utf-8")
    _check_analysis(path, result.truth, ingestor, reader)
