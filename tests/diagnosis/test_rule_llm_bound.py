"""llm_bound: requests that are nearly all model calls; the application's own work is a sliver."""

from __future__ import annotations

from client_cases import Call, Tool, agent_loop, repeat
from diagnosis_support import by_cause, diagnose


def test_requests_that_are_model_calls_and_little_else() -> None:
    # Three 200 ms calls 5 ms apart, streamed with the first token at 60 ms. Each call's first ms, before its HTTP
    # request starts, is the caller's preparation: 597 of 620 ms are model calls, 177 of them up to the first token.
    finding = by_cause(diagnose(repeat(4, [Call(ttft_ms=60.0)] * 3)))["llm_bound"]
    assert finding.severity == "info"
    evidence = finding.evidence
    assert evidence["llm_share"] == 0.963 and evidence["affected_request_count"] == 4
    assert evidence["first_token_share"] == 0.285 and evidence["stream_share"] == 0.677
    assert evidence["whole_call_share"] == 0.0 and evidence["engine_share"] == 0.0
    assert evidence["model_name"] == "gpt-4o-mini" and evidence["provider_name"] == "openai"
    assert evidence["calls_per_request_count_p50"] == 3
    assert "96%" in finding.title and "30% waiting for the first token" in finding.title


def test_an_agent_loop_with_its_tools_is_not_llm_bound() -> None:
    # 3 x 200 ms of calls and 2 x 50 ms of tools: 0.80 of the request, as the real captures show (0.55-0.84).
    assert "llm_bound" not in by_cause(diagnose(repeat(4, agent_loop())))


def test_just_under_the_threshold() -> None:
    # 600 ms of calls, a 45 ms tool: 600 / 670 = 0.896 < 0.9.
    steps = [Call(), Call(), Tool(duration_ms=45.0), Call()]
    assert "llm_bound" not in by_cause(diagnose(repeat(4, steps)))


def test_one_request_is_not_enough() -> None:
    assert "llm_bound" not in by_cause(diagnose(repeat(1, [Call()] * 3)))
