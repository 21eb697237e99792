"""prompt_cache_unused: calls that re-send a prompt prefix get (almost) none of it from the provider's cache."""

from __future__ import annotations

from dataclasses import replace

import diagnosis_cases as cases
from client_cases import Call, ClientRequest, Tool, build_all, repeat
from diagnosis_support import by_cause, diagnose


def chain(cached: int | None, first: int = 1700, growth: int = 75, calls: int = 3) -> list[Call | Tool]:
    """An agent loop on a long prompt: each call continues the one before (input + answer + tool result);
    every call but the first reports ``cached`` cached tokens (the first reports 0)."""
    steps: list[Call | Tool] = []
    for number in range(calls):
        steps.append(
            Call(input_tokens=first + number * growth, output_tokens=18, cached_tokens=cached if number else 0)
        )
        steps.append(Tool(name=f"tool_{number}"))
    return steps[:-1]


def test_a_changing_prefix_misses_the_cache() -> None:
    # Four requests, two continuations each: 8 calls re-sending 1,700-1,775 tokens, 16 of them cached.
    finding = by_cause(diagnose(repeat(4, chain(cached=16))))["prompt_cache_unused"]
    evidence = finding.evidence
    assert evidence["repeat_call_count"] == 8 and evidence["prefix_key_name"] == "continuation"
    assert evidence["shared_prefix_tokens_p50"] == 1737.5 and evidence["repeat_cached_tokens_share"] == 0.009
    # Missed: (1,700 - 16) + (1,775 - 16) per request, of 5,325 input tokens: 0.65 >= 0.5.
    assert evidence["missed_input_share"] == 0.647 and finding.severity == "critical"
    assert finding.confidence >= 0.8


def test_a_stable_prefix_is_served_from_the_cache() -> None:
    assert "prompt_cache_unused" not in by_cause(diagnose(repeat(4, chain(cached=1680))))


def test_prefixes_shorter_than_providers_cache_say_nothing() -> None:
    assert "prompt_cache_unused" not in by_cause(diagnose(repeat(4, chain(cached=0, first=600))))


def test_calls_that_do_not_report_cached_tokens_say_nothing() -> None:
    assert "prompt_cache_unused" not in by_cause(diagnose(repeat(4, chain(cached=None))))


def test_independent_calls_share_nothing_the_counts_can_show() -> None:
    steps = [Call(input_tokens=1700, cached_tokens=0), Call(input_tokens=1702, cached_tokens=0)] * 2
    assert "prompt_cache_unused" not in by_cause(diagnose(repeat(4, steps)))


def test_a_conversation_across_requests_shares_its_history() -> None:
    # One call per request, turns of two conversations 5 s apart: each later turn re-sends the earlier ones.
    requests = [
        ClientRequest(
            trace=i,
            start_ms=i * 5_000.0,
            steps=[Call(input_tokens=1200 + 300 * (i // 2), cached_tokens=0, conversation=f"c{i % 2}")],
        )
        for i in range(8)
    ]
    finding = by_cause(diagnose(build_all(requests)))["prompt_cache_unused"]
    assert finding.evidence["prefix_key_name"] == "gen_ai.conversation.id"
    assert finding.evidence["repeat_call_count"] == 6


def test_turns_beyond_the_cache_lifetime_are_not_expected_to_hit() -> None:
    requests = [
        ClientRequest(
            trace=i, start_ms=i * 400_000.0, steps=[Call(input_tokens=1500, cached_tokens=0, conversation="c")]
        )
        for i in range(6)
    ]
    assert "prompt_cache_unused" not in by_cause(diagnose(build_all(requests)))


def test_calls_the_engine_traces_are_left_to_prefix_cache_unused() -> None:
    # The stack's conversations with vLLM's own spans: prefix_cache_unused judges them, this rule stays out.
    spans = [
        replace(s, attributes={**s.attributes, "gen_ai.usage.cache_read.input_tokens": "0"})
        if s.name.startswith("chat")
        else s
        for s in cases.prefix_repeats(60.0)
    ]
    found = by_cause(diagnose(spans))
    assert "prefix_cache_unused" in found and "prompt_cache_unused" not in found
