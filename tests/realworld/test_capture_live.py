"""Each driver live: a real instrumentation library from PyPI against the emulator, spans into a served Hotspan.

Checked: the library's own conventions arrive, every parent resolves within the trace, one client LLM span
per LLM call the wire saw, vLLM's ``llm_request`` (engine spans on) under the client's LLM call, and the
ground truth lines up with the trace (the root span lasts the measured e2e). Hotspan's stage split is not
asserted here (that is the analysis's tests, on the stored captures).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import pytest
from realworld_kit import (
    LLM_REQUEST,
    LiveRun,
    engine_spans_expected,
    engine_spans_under_llm_calls,
    has_convention,
    is_llm_call,
    llm_span_current,
    orphans,
    roots,
)

from instrumented_stack.realclients import DRIVERS, SIDE_VENV_DRIVERS
from instrumented_stack.realclients.node_packages import node_available

STREAMED = {
    "openai_v2",
    "pydantic_ai",
    "langgraph",
    "langfuse",
    "strands",
    "vercel_ai",
    "logfire",
    "anthropic_sdk",
    "openinference_anthropic",
}
"""Drivers run live with streaming on (the others without), so both paths run live across the suite."""
NODE_DRIVERS = frozenset({"vercel_ai"})
"""Drivers whose work runs in Node (``instrumented_stack/realclients/node``)."""


def importable(module: str) -> bool:
    """Whether ``module`` (dotted) can be imported in this interpreter, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_driver_spans_arrive_whole_with_the_library_conventions(
    driver: str, live_driver: Callable[..., LiveRun]
) -> None:
    if driver in NODE_DRIVERS and not node_available():
        pytest.skip("node and npm are needed for the Node drivers (tests/realworld/README.md)")
    if driver in SIDE_VENV_DRIVERS and not importable(SIDE_VENV_DRIVERS[driver]):
        pytest.skip(
            f"{SIDE_VENV_DRIVERS[driver]} conflicts with the project's dependencies and is not installed here; its"
            " driver runs in a side virtualenv (tests/realworld/README.md), its stored captures are checked offline"
        )
    result, traces = live_driver(driver, stream=driver in STREAMED, engine_spans=True)
    assert len(traces) == 2
    for request in result.truth["requests"]:
        spans = traces[request["trace_id"]]
        assert has_convention(spans, driver), sorted({k for s in spans for k in s["attributes"]})
        assert orphans(spans) == []
        (root,) = roots(spans)
        # The root span wraps exactly the measured work: its duration is the truth's e2e within 20 ms.
        assert abs(root["duration_ns"] - request["e2e_ns"]) < 20_000_000
        assert request["llm_calls"] >= 2 and request["tools"]
        assert sum(1 for s in spans if is_llm_call(s)) == request["llm_calls"]
        engine = engine_spans_expected(driver, request["llm_calls"], engine_spans=True)
        assert sum(1 for s in spans if s["name"] == LLM_REQUEST) == engine
        under = engine_spans_under_llm_calls(spans)
        assert all(under) if llm_span_current(driver, driver in STREAMED) else not any(under)


def test_engine_spans_off_leaves_only_client_spans(live_driver: Callable[..., LiveRun]) -> None:
    result, traces = live_driver("openinference_openai", stream=True, engine_spans=False)
    for request in result.truth["requests"]:
        spans = traces[request["trace_id"]]
        assert all(s["service_name"] != "vllm" for s in spans)
        assert sum(1 for s in spans if is_llm_call(s)) == request["llm_calls"]
        assert all(a["first_byte_ns"] < a["end_ns"] for a in request["llm_attempts"])


def test_without_http_spans_the_engine_span_is_a_child_of_the_llm_call(live_driver: Callable[..., LiveRun]) -> None:
    result, traces = live_driver("openai_v2", stream=False, engine_spans=True, http_spans=False)
    for request in result.truth["requests"]:
        spans = traces[request["trace_id"]]
        by_id = {s["span_id"]: s for s in spans}
        engine = [s for s in spans if s["name"] == LLM_REQUEST]
        assert len(engine) == request["llm_calls"]
        assert all(is_llm_call(by_id[s["parent_span_id"]]) for s in engine)
