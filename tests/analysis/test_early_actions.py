"""analysis.early_actions (an LLM call its caller acted on before the call's span ended) and the call's request
start from its ``gen_ai.request.attempt`` event (analysis.genai.request_start_ns).

The shapes are those of Claude Code 2.1.197's turns on the emulator (tests/realworld/captures/claude_code): the
tool starts before the model request's span ends, and either outlives it or lies inside it. Expected splits are
summed by hand from the spans' figures (ms), not read from Hotspan.
"""

from __future__ import annotations

import polars as pl
from analysis_support import T0, S, frame

from analysis import stage_breakdown, wall_clock_breakdown
from analysis.trace_analysis import analyze
from units import NS_PER_MS as MS

SERVICE = "claude-code"
_GENERATION = {
    "langfuse.observation.type": "generation",
    "langfuse.observation.completion_start_time": '"2023-11-14T22:13:20.110000Z"',
}
"""A Langfuse generation whose first token came 110 ms after T0 (1,700,000,000 s since the epoch)."""


def _call(span_id: str, start: int, end: int, ttft_ms: int | None) -> S:
    attributes = {"span.type": "llm_request", "gen_ai.system": "anthropic", "gen_ai.request.model": "m"}
    if ttft_ms is not None:
        attributes["ttft_ms"] = str(ttft_ms)
    return S(span_id, "turn", start * MS, end * MS, "claude_code.llm_request", SERVICE, "Internal", attributes)


def _turn(first_end: int, tool: tuple[int, int], ttft_ms: int | None = 100) -> list[S]:
    return [
        S("turn", "", 0, 400 * MS, "claude_code.interaction", SERVICE, "Internal", {"span.type": "interaction"}),
        _call("ask1", 10, first_end, ttft_ms),
        S("tool", "turn", tool[0] * MS, tool[1] * MS, "claude_code.tool", SERVICE, "Internal", {"tool_name": "Read"}),
        _call("ask2", 215, 395, 50 if ttft_ms is not None else None),
    ]


def _views(spans: list[S] | pl.DataFrame) -> tuple[dict[str, float], dict[str, float]]:
    data = spans if isinstance(spans, pl.DataFrame) else frame(spans)
    critical, wall = stage_breakdown(data), wall_clock_breakdown(data)
    return (
        {row["stage"]: row["duration_ns"] / MS for row in critical.iter_rows(named=True)},
        {row["stage"]: round(row["duration_ns"] / MS, 6) for row in wall.iter_rows(named=True)},
    )


def _adjustment(spans: list[S]) -> dict[str, str]:
    rows = analyze(frame(spans)).tree.frame().iter_rows(named=True)
    return {row["span_id"]: row["adjustment"] for row in rows if row["adjustment"]}


def test_a_tool_started_on_the_stream_that_outlives_the_call_ends_the_call() -> None:
    # ask1 [10, 200] first token at 110, tool [190, 210], ask2 [215, 395] first token at 265. ask1 is cut at 190:
    # first token 100 + 50, stream 80 + 130, tool 20, the loop's own 10 + 5 + 5. Without the cut the critical
    # path cannot step from the tool back to ask1 and gives its 180 ms to the loop (agent).
    spans = _turn(200, (190, 210))
    expected = {"agent": 20.0, "tool": 20.0, "llm.first_token": 150.0, "llm.stream": 210.0}
    critical, wall = _views(spans)
    assert critical == expected
    assert wall == expected
    assert _adjustment(spans) == {"ask1": "early_action"}


def test_a_tool_inside_a_childless_call_after_its_first_token_is_analysed_as_its_child() -> None:
    # ask1 [10, 212] holds the tool [190, 210]: the tool is the call's child, so the call keeps its own time before
    # (first token 100, stream 80) and after (2) the tool; the loop's own 10 + 3 + 5. Without it the tool's 20 ms
    # would be the model's.
    spans = _turn(212, (190, 210))
    critical, wall = _views(spans)
    expected = {"agent": 18.0, "tool": 20.0, "llm.first_token": 150.0, "llm.stream": 212.0}
    assert critical == expected
    assert wall == expected
    assert _adjustment(spans) == {"tool": "early_action"}


def test_overlap_alone_is_not_an_early_action() -> None:
    # No first token known: the overlap may be concurrent work, so nothing is cut (Jaeger UI's critical path).
    assert _adjustment(_turn(200, (190, 210), ttft_ms=None)) == {}
    # A tool that starts before the call's first token is concurrent with the model, not an action on its answer.
    assert _adjustment(_turn(200, (60, 210))) == {}


def test_a_tool_started_while_two_calls_stream_is_left_alone() -> None:
    # Two calls of one turn stream at once; a tool starting during both may act on either: nothing is changed.
    spans = [*_turn(200, (190, 260)), _call("ask3", 100, 250, 30)]
    assert _adjustment(spans) == {}


def test_a_call_whose_request_is_its_sibling_keeps_its_stream() -> None:
    # Langfuse's shape (the LLM span not current while the SDK sends): the generation [10, 300] and its HTTP request
    # [15, 295] are siblings, a tool [200, 210] runs inside both. The request is the call's (analysis.wrappers), so
    # the call has a child and the tool is left to the wrappers' rule: the call is not cut at the tool.
    spans = [
        S("root", "", 0, 400 * MS, "POST /ask", "app", "Server"),
        S("gen", "root", 10 * MS, 300 * MS, "OpenAI-generation", "app", "Internal", _GENERATION),
        S("post", "root", 15 * MS, 295 * MS, "POST", "app", "Client", {"http.request.method": "POST"}),
        S("tool", "root", 200 * MS, 210 * MS, "lookup", "app", "Internal", {"langfuse.observation.type": "tool"}),
    ]
    assert "early_action" not in _adjustment(spans).values()


def test_the_attempt_event_starts_the_request_and_the_time_before_it_is_the_callers() -> None:
    spans = _turn(200, (200, 210))
    data = frame(spans).with_columns(
        pl.Series(
            "event_names", [[], ["gen_ai.request.attempt"], [], ["gen_ai.request.attempt"]], dtype=pl.List(pl.String)
        ),
        pl.Series("event_times_unix_nano", [[], [T0 + 14 * MS], [], [T0 + 222 * MS]], dtype=pl.List(pl.Int64)),
    )
    critical, _ = _views(data)
    # ask1 [10, 200]: 4 ms building the request, then first token at 110 (96 ms), stream 90; ask2 [215, 395]: 7 ms,
    # then 43 ms to its first token at 265, stream 130; the loop's own 10 + 5 + 5, the tool 10 (no overlap).
    assert critical == {"agent": 31.0, "tool": 10.0, "llm.first_token": 139.0, "llm.stream": 220.0}
