"""slow_first_token: model calls wait long for their first token, then stream quickly."""

from __future__ import annotations

from client_cases import Call, Tool, repeat
from diagnosis_support import by_cause, diagnose


def test_calls_that_wait_seconds_then_stream() -> None:
    # 1.5 s to the first token, 0.2 s of streaming 20 tokens, a 300 ms tool between the two calls.
    slow = Call(duration_ms=1700.0, ttft_ms=1500.0)
    finding = by_cause(diagnose(repeat(3, [slow, Tool(duration_ms=300.0), slow])))["slow_first_token"]
    evidence = finding.evidence
    assert evidence["ttft_ms_p50"] == 1500.0 and evidence["stream_ms_p50"] == 200.0
    assert evidence["first_token_call_share"] == 0.882 and evidence["slow_call_count"] == 6
    assert evidence["time_per_output_token_ms_p50"] == 10.526  # 200 ms over 19 tokens after the first
    # The first token is 2,998 ms of a 3,720 ms request on the critical path (each call's first ms is preparation).
    assert evidence["first_token_share"] == 0.806 and finding.severity == "critical"


def test_under_a_second_is_not_slow() -> None:
    quick = Call(duration_ms=1000.0, ttft_ms=900.0)
    assert "slow_first_token" not in by_cause(diagnose(repeat(3, [quick, Tool(), quick])))


def test_a_long_stream_after_a_wait_is_slow_generation_not_a_slow_start() -> None:
    # 1.5 s to the first token, then 6 s of streaming: the wait is a fifth of the calls' time.
    long = Call(duration_ms=7500.0, ttft_ms=1500.0, output_tokens=600)
    assert "slow_first_token" not in by_cause(diagnose(repeat(3, [long, Tool(), long])))


def test_calls_whose_first_token_is_unknown_say_nothing() -> None:
    assert "slow_first_token" not in by_cause(diagnose(repeat(3, [Call(duration_ms=1700.0)] * 2)))


def test_a_tool_between_slow_calls_makes_it_a_warning() -> None:
    slow = Call(duration_ms=1200.0, ttft_ms=1100.0)
    finding = by_cause(diagnose(repeat(3, [slow, Tool(duration_ms=5000.0), slow])))["slow_first_token"]
    assert finding.severity == "warning" and finding.evidence["first_token_share"] < 0.3
