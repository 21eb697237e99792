"""prefix_cache_unused: repeats of a prompt prefix that pay full prefill, and prefix caching switched off."""

from __future__ import annotations

import diagnosis_cases as cases
from diagnosis_support import Chat, Request, build_all, by_cause, clean_requests, diagnose


def test_conversation_turns_that_prefill_in_full() -> None:
    # Nine later turns of three conversations prefill 3,000 tokens in 60 ms, as much as each first turn:
    # ratio 1.0 >= 0.7. Prefill timing alone is no cache signal (a long new suffix, batching or a busy host
    # look the same), so it is worth knowing only.
    finding = by_cause(diagnose(cases.prefix_repeats(60.0)))["prefix_cache_unused"]
    assert finding.severity == "info" and "timing alone" in finding.title
    assert finding.evidence["repeat_call_count"] == 9
    assert finding.evidence["prefix_key_name"] == "gen_ai.conversation.id"
    assert finding.evidence["repeat_prefill_ratio"] == 1.0


def test_a_cache_signal_makes_full_prefills_the_cause() -> None:
    # The same repeats with the engine's hit rate at zero, or reporting no cached tokens: prefill is about half
    # of the latency, so critical.
    for metrics, cached in ((cases.prefix_metrics(36_000, 0), None), (None, 0)):
        finding = by_cause(diagnose(cases.prefix_repeats(60.0, cached_tokens=cached), metrics))["prefix_cache_unused"]
        assert finding.severity == "critical" and "timing alone" not in finding.title


def test_a_conversation_named_on_the_agent_keys_its_calls() -> None:
    # Agents name the conversation on their own span; the call carries only its whole prompt's hash, unique
    # per turn. The request's conversation ranks with the call's own conversation key, before that hash.
    missed = by_cause(diagnose(cases.prefix_repeats(60.0, cached_tokens=0, on_agent=True)))["prefix_cache_unused"]
    assert missed.severity == "critical"
    assert missed.evidence["prefix_key_name"] == "request conversation"
    assert missed.evidence["repeat_call_count"] == 9
    served = diagnose(cases.prefix_repeats(6.0, cached_tokens=2_900, on_agent=True))
    assert "prefix_cache_unused" not in by_cause(served)


def test_conversation_misses_beside_served_calls_are_worth_knowing_only() -> None:
    # Two conversations' six later turns report nothing cached, a third's three are served (2,900 of 3,000
    # tokens): the cache works, so the misses may be turns that resend no history (a session grouping
    # independent questions), not a cache fault.
    requests = [
        Request(
            trace=i,
            start_ms=i * 250.0,
            conversation=f"conversation-{i % 3}",
            chats=(Chat(prompt=f"turn {i}", prompt_tokens=3_000, cached_tokens=2_900 if i % 3 == 0 else 0),),
        )
        for i in range(12)
    ]
    finding = by_cause(diagnose(build_all(requests)))["prefix_cache_unused"]
    assert finding.severity == "info" and "may share no history" in finding.title
    assert finding.evidence["cache_served_call_count"] == 4


def test_repeats_served_by_the_cache_are_fine() -> None:
    # Later turns prefill in 6 ms: a tenth of the first turn's cost per token, the cache at work.
    assert "prefix_cache_unused" not in by_cause(diagnose(cases.prefix_repeats(6.0)))


def test_reported_cached_tokens_decide_over_timing() -> None:
    missed = by_cause(diagnose(cases.prefix_repeats(60.0, cached_tokens=0)))["prefix_cache_unused"]
    assert missed.evidence["repeat_cached_tokens_share"] == 0.0
    # 2,900 of 3,000 tokens cached: the cache works, whatever the (noisy) prefill time says.
    assert "prefix_cache_unused" not in by_cause(diagnose(cases.prefix_repeats(60.0, cached_tokens=2_900)))


def test_metrics_showing_caching_off_make_a_warning_even_without_visible_repeats() -> None:
    finding = by_cause(diagnose(build_all(clean_requests()), cases.prefix_metrics(0, 0)))["prefix_cache_unused"]
    assert finding.severity == "warning"
    assert "disabled" in finding.title
    assert 0.5 <= finding.confidence < 0.8
    assert finding.evidence["prefix_cache_queries_tokens"] == 0


def test_metrics_and_traces_together_are_most_confident() -> None:
    spans = cases.prefix_repeats(60.0)
    trace_only = by_cause(diagnose(spans))["prefix_cache_unused"]
    no_hits = by_cause(diagnose(spans, cases.prefix_metrics(36_000, 0)))["prefix_cache_unused"]
    assert no_hits.confidence > trace_only.confidence
    assert no_hits.evidence["prefix_cache_hit_share"] == 0.0


def test_no_hits_without_shared_prefixes_is_not_a_finding() -> None:
    # Distinct prompts share nothing, so a cache with no hits is doing its job (the clean stack run looks so).
    report = diagnose(build_all(clean_requests()), cases.prefix_metrics(30_000, 0))
    assert "prefix_cache_unused" not in by_cause(report)
