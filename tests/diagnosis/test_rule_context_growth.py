"""context_growth: each call of a request re-sends a context that keeps growing while the answers stay flat."""

from __future__ import annotations

from client_cases import Call, Tool, agent_loop, repeat
from diagnosis_support import by_cause, diagnose


def loop(inputs: list[int], outputs: list[int] | None = None) -> list[Call | Tool]:
    """Calls with these input (and output) token counts, a tool between each two."""
    steps: list[Call | Tool] = []
    for number, tokens in enumerate(inputs):
        steps.append(Call(input_tokens=tokens, output_tokens=(outputs or [18] * len(inputs))[number]))
        steps.append(Tool(name=f"tool_{number}"))
    return steps[:-1]


def test_a_transcript_re_sent_on_every_call() -> None:
    # 591 -> 1,257 -> 1,950: the whole conversation appended again before each call (x3.3).
    finding = by_cause(diagnose(repeat(4, loop([591, 1257, 1950]))))["context_growth"]
    evidence = finding.evidence
    assert finding.severity == "warning"  # x3.3 < 4
    assert evidence["affected_request_share"] == 1.0 and evidence["input_growth_ratio_p50"] == 3.3
    assert evidence["input_growth_tokens_p50"] == 679.5 and evidence["output_growth_tokens_p50"] == 0.0
    assert (evidence["first_input_tokens_p50"], evidence["last_input_tokens_p50"]) == (591, 1950)
    # Of 3,798 input tokens a request sends, 591 + 1,257 were sent by the call before.
    assert evidence["resent_input_share"] == 0.487
    assert "x3.3" in finding.title


def test_doubling_every_call_is_critical() -> None:
    finding = by_cause(diagnose(repeat(4, loop([600, 1200, 2400]))))["context_growth"]
    assert finding.severity == "critical" and finding.evidence["input_growth_ratio_p50"] == 4.0


def test_an_agent_loop_appending_answers_and_tool_results_is_fine() -> None:
    # +70 tokens a call on 600: x1.2 over three calls, as the real captures show.
    assert "context_growth" not in by_cause(diagnose(repeat(4, agent_loop())))
    # Ten turns of it double the context (x2.05): each call re-sends a transcript twice the first one, which the
    # rule reports though no message is copied; the threshold draws the line there.
    long_loop = by_cause(diagnose(repeat(4, agent_loop(calls=10, growth=70))))
    assert long_loop["context_growth"].evidence["input_growth_ratio_p50"] == 2.05


def test_answers_growing_with_the_context_are_not_re_sent_context() -> None:
    # A refinement chain whose answers grow as fast as its inputs: the growth is the answers fed back.
    steps = loop([600, 1300, 2000], outputs=[700, 1400, 2100])
    assert "context_growth" not in by_cause(diagnose(repeat(4, steps)))


def test_a_context_that_shrinks_on_the_way_is_not_growth() -> None:
    assert "context_growth" not in by_cause(diagnose(repeat(4, loop([600, 1500, 900, 1400]))))


def test_two_calls_are_no_trend() -> None:
    assert "context_growth" not in by_cause(diagnose(repeat(4, loop([600, 2400]))))


def test_one_request_in_twelve_is_an_occasional_long_conversation() -> None:
    growing = repeat(1, loop([600, 1300, 2000]))
    steady = [span for span in repeat(12, agent_loop()) if int(span.trace_id, 16) > 1]
    assert "context_growth" not in by_cause(diagnose(growing + steady))
