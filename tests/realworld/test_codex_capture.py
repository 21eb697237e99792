"""The Codex CLI's own traces, from the real CLI (``instrumented_stack.realclients.codex_cli``): the stored captures
(``captures/codex``, Codex 0.171.0, two ``codex exec`` turns of eight model requests each on the emulator's
Responses API, with the engine's spans on and off) decomposed as the wire measured them, and, where the CLI is
installed (``$HOTSPAN_CODEX`` or ``codex`` on the PATH; skipped otherwise, with the reason shown), a live turn
checked the same way.

The truth (``*.truth.json``) is the recording proxy's: each model request from its headers' arrival to the last
byte handed back, and the turn from its ``turn.started`` to its ``turn.completed`` event on Codex's stdout.
Codex's request span ends ~25 ms after the proxy handed the response's headers on and its last event is handled
~30 ms after the last byte (the CLI's own reading: the proxy agrees with a Python client's timing within 3 ms),
so the LLM share reads ~3.5 points above the truth.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from realworld_kit import check_cli_capture, roots, spans_from_otlp_json

from analysis import request_summary
from collector.ingest import Ingestor
from instrumented_stack.realclients.capture import capture_name
from instrumented_stack.realclients.cli_capture import run_with_sink
from instrumented_stack.realclients.codex_cli import capture_turns, find_codex
from storage.reader import ClickHouseTraceReader
from storage.tenancy import ALL_TENANTS

CAPTURES = Path(__file__).parent / "captures" / "codex"
SHARE_TOLERANCE = 0.05
ROOT, TURN, REQUEST = "turn/start", "session_task.turn", "model_client.stream_responses_api"


def _check_shape(capture: dict[str, Any], truth: dict[str, Any]) -> None:
    traces = spans_from_otlp_json(capture)
    # Codex sends a traceparent with each model request: a traced engine's spans join the turn's trace.
    assert truth["traceparent_sent"] == truth["proxied_requests"] == sum(r["llm_calls"] for r in truth["requests"])
    for request in truth["requests"]:
        spans = traces[request["trace_id"]]
        root = roots(spans)
        turn = [span for span in spans if span["name"] == TURN]
        assert [span["name"] for span in root] == [ROOT]
        # The app server answers turn/start at once; the turn runs on in a task it spawned.
        answered = root[0]["end_time_unix_nano"] - root[0]["start_time_unix_nano"]
        assert len(turn) == 1 and turn[0]["end_time_unix_nano"] - root[0]["end_time_unix_nano"] > 10 * answered
        assert sum(1 for span in spans if span["name"] == REQUEST) == request["llm_calls"] == 8
        engine = sum(1 for span in spans if span["name"] == "llm_request")
        assert engine == (request["llm_calls"] if truth["engine_spans"] else 0)


def _check_analysis(path: Path, truth: dict[str, Any], ingestor: Ingestor, reader: ClickHouseTraceReader) -> None:
    # Codex reports each response's usage on the handler of its last event (analysis.stream_logs).
    shares = check_cli_capture(path, truth, ingestor, reader)
    assert shares.critical == pytest.approx(shares.truth, abs=SHARE_TOLERANCE)
    assert shares.wall == pytest.approx(shares.truth, abs=SHARE_TOLERANCE)
    # The request lasts as long as its turn, not its ~15 ms JSON-RPC answer (analysis.spawned_tasks).
    summary = request_summary(pl.concat([reader.trace(r["trace_id"], tenant=ALL_TENANTS) for r in truth["requests"]]))
    durations = summary.rows_by_key("trace_id", unique=True, named=True)
    for request in truth["requests"]:
        assert durations[request["trace_id"]]["duration_ns"] == pytest.approx(request["e2e_ns"], rel=0.05)


@pytest.mark.parametrize("engine_spans", [True, False])
def test_the_stored_captures_are_codexs_own_turns(engine_spans: bool) -> None:
    stem = CAPTURES / capture_name(engine_spans, stream=True)
    truth = json.loads(stem.with_name(stem.name + ".truth.json").read_text(encoding="utf-8"))
    assert truth["libraries"] == {"npm:@openai/codex": "0.171.0"}
    assert truth["engine_spans"] is engine_spans
    _check_shape(json.loads(stem.with_suffix(".json").read_text(encoding="utf-8")), truth)


@pytest.mark.parametrize("engine_spans", [True, False])
def test_codex_turns_decompose_as_the_wire_measured(
    engine_spans: bool, ingestor: Ingestor, reader: ClickHouseTraceReader
) -> None:
    stem = CAPTURES / capture_name(engine_spans, stream=True)
    truth = json.loads(stem.with_name(stem.name + ".truth.json").read_text(encoding="utf-8"))
    _check_analysis(stem.with_suffix(".json"), truth, ingestor, reader)


@pytest.mark.skipif(
    find_codex() is None, reason="the codex CLI is not installed (instrumented_stack.realclients.codex_cli)"
)
def test_a_live_codex_turn_decomposes_as_the_wire_measured(
    ingestor: Ingestor, reader: ClickHouseTraceReader, tmp_path: Path
) -> None:
    codex = find_codex()
    assert codex is not None
    result = run_with_sink(lambda endpoint, sink: capture_turns(codex, endpoint, sink, requests=1, engine_spans=False))
    _check_shape(result.capture, result.truth)
    path = tmp_path / "capture.json"
    path.write_text(json.dumps(result.capture), encoding="utf-8")
    _check_analysis(path, result.truth, ingestor, reader)
