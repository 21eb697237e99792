"""The stored golden captures (``tests/realworld/captures``, written by
``python -m instrumented_stack.realclients.capture``): one per driver x engine spans on/off x streaming
off/on, each whole and consistent with its ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from realworld_kit import (
    LLM_REQUEST,
    engine_spans_expected,
    engine_spans_under_llm_calls,
    has_convention,
    is_llm_call,
    llm_span_current,
    orphans,
    roots,
    spans_from_otlp_json,
)

from instrumented_stack.realclients import DRIVERS
from instrumented_stack.realclients.capture import capture_name
from instrumented_stack.realclients.common import ROOT_SPAN_NAME

CAPTURES = Path(__file__).parent / "captures"
CASES = [(driver, engine, stream) for driver in sorted(DRIVERS) for engine in (True, False) for stream in (False, True)]


@pytest.mark.parametrize(("driver", "engine_spans", "stream"), CASES)
def test_capture_is_whole_and_matches_its_truth(driver: str, engine_spans: bool, stream: bool) -> None:
    stem = CAPTURES / driver / capture_name(engine_spans, stream)
    traces = spans_from_otlp_json(json.loads(stem.with_suffix(".json").read_text(encoding="utf-8")))
    truth = json.loads(stem.with_name(stem.name + ".truth.json").read_text(encoding="utf-8"))
    assert (truth["driver"], truth["engine_spans"], truth["stream"]) == (driver, engine_spans, stream)
    assert "missing" not in truth["libraries"].values()
    assert sorted(traces) == sorted(r["trace_id"] for r in truth["requests"])
    for request in truth["requests"]:
        spans = traces[request["trace_id"]]
        assert [s["name"] for s in roots(spans)] == [ROOT_SPAN_NAME]
        assert orphans(spans) == []
        assert has_convention(spans, driver)
        assert sum(1 for s in spans if is_llm_call(s)) == request["llm_calls"] >= 2
        engine = sum(1 for s in spans if s["name"] == LLM_REQUEST)
        assert engine == engine_spans_expected(driver, request["llm_calls"], engine_spans)
        assert 0 < request["llm_in_flight_ns"] <= request["e2e_ns"]
        assert all(a["streamed"] == stream for a in request["llm_attempts"])
        under = engine_spans_under_llm_calls(spans)
        assert all(under) if llm_span_current(driver, stream) else not any(under)
