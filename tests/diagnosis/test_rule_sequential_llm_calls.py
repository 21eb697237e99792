"""sequential_llm_calls: model calls that do not need each other's answers, made one after another."""

from __future__ import annotations

from client_cases import Call, Together, Tool, agent_loop, repeat
from diagnosis_support import by_cause, diagnose

SIDE = [Call(input_tokens=604), Call(input_tokens=601), Call(input_tokens=603)]
"""Three questions about the user's question, each on its own prompt (inputs differ by a few tokens)."""
ANSWER = Call(input_tokens=700, output_tokens=24)
"""The answer that uses the side answers (its input carries them)."""


def test_independent_calls_one_after_another() -> None:
    # Three 200 ms calls 5 ms apart span 610 ms; at once they would take 200 ms: 410 ms saved of an 825 ms request.
    finding = by_cause(diagnose(repeat(4, [*SIDE, ANSWER])))["sequential_llm_calls"]
    evidence = finding.evidence
    assert finding.severity == "critical"  # 0.5 of latency >= 0.3
    assert evidence["affected_request_share"] == 1.0 and evidence["independent_call_count"] == 12
    assert evidence["group_calls_count_max"] == 3
    assert (evidence["serial_ms_p50"], evidence["concurrent_ms_p50"], evidence["saved_ms_p50"]) == (610.0, 200.0, 410.0)
    assert evidence["saved_share"] == 0.497
    assert finding.confidence >= 0.8


def test_the_same_calls_at_once_are_fine() -> None:
    assert "sequential_llm_calls" not in by_cause(diagnose(repeat(4, [Together(tuple(SIDE)), ANSWER])))


def test_an_agent_loop_is_dependent() -> None:
    # Each call's input grows by more than the last answer, and a tool runs between calls.
    assert "sequential_llm_calls" not in by_cause(diagnose(repeat(4, agent_loop())))


def test_a_tool_between_calls_may_feed_the_next() -> None:
    steps = [SIDE[0], Tool(), SIDE[1], Tool(arguments='{"order_id":"A-2"}'), SIDE[2], ANSWER]
    assert "sequential_llm_calls" not in by_cause(diagnose(repeat(4, steps)))


def test_an_input_that_grew_by_the_last_answer_carries_it() -> None:
    # 604 -> 616 is 12 tokens, at least half of the 20-token answer before it.
    steps = [Call(input_tokens=604), Call(input_tokens=616), Call(input_tokens=628), ANSWER]
    assert "sequential_llm_calls" not in by_cause(diagnose(repeat(4, steps)))


def test_repeats_and_retries_are_not_independent_calls() -> None:
    same = [Call(input_tokens=604), Call(input_tokens=604), ANSWER]
    retried = [Call(input_tokens=604, status="Error"), Call(input_tokens=601), ANSWER]
    assert "sequential_llm_calls" not in by_cause(diagnose(repeat(4, same)))
    assert "sequential_llm_calls" not in by_cause(diagnose(repeat(4, retried)))


def test_calls_without_token_counts_cannot_be_judged() -> None:
    unknown = [Call(input_tokens=None, output_tokens=None)] * 3
    assert "sequential_llm_calls" not in by_cause(diagnose(repeat(4, unknown)))


def test_a_small_saving_is_not_worth_reporting() -> None:
    # Two 20 ms calls in a request with 400 ms of tools: 25 ms saved of 490 ms is 0.05 < 0.1.
    steps = [
        Tool(duration_ms=400.0),
        Call(input_tokens=604, duration_ms=20.0),
        Call(input_tokens=601, duration_ms=20.0),
    ]
    assert "sequential_llm_calls" not in by_cause(diagnose(repeat(4, steps)))


def test_a_step_that_sends_on_only_the_answer_depends_on_it() -> None:
    # Generate from a 3,000-token prompt, then translate the 300-token answer: a smaller input, not the same kind.
    steps = [Call(input_tokens=3000, output_tokens=300), Call(input_tokens=350, output_tokens=300)] * 2
    assert "sequential_llm_calls" not in by_cause(diagnose(repeat(4, steps)))


def test_captured_content_decides_where_the_counts_cannot() -> None:
    answer = '[{"role":"assistant","parts":[{"type":"text","content":"Order A-1 ships tomorrow from Oslo."}]}]'
    # Different sizes, yet the second prompt does not quote the first answer: independent.
    unrelated = [
        Call(input_tokens=900, answer=answer, content='[{"role":"user","content":"Classify: where is A-1?"}]'),
        Call(input_tokens=2000, content='[{"role":"user","content":"Which city is in: where is A-1?"}]'),
        ANSWER,
    ]
    assert "sequential_llm_calls" in by_cause(diagnose(repeat(4, unrelated)))
    # The same size, but the second prompt quotes the first answer: dependent.
    quoting = [
        Call(input_tokens=604, answer=answer, content='[{"role":"user","content":"Shorten"}]'),
        Call(input_tokens=603, content='[{"role":"user","content":"Shorten: Order A-1 ships tomorrow from Oslo."}]'),
        ANSWER,
    ]
    assert "sequential_llm_calls" not in by_cause(diagnose(repeat(4, quoting)))
