"""redundant_llm_calls: the same prompt signature twice within one request."""

from __future__ import annotations

import diagnosis_cases as cases
from client_cases import Call, Tool, repeat
from diagnosis_support import by_cause, diagnose


def test_the_same_prompt_twice_per_request() -> None:
    finding = by_cause(diagnose(cases.repeated_prompts(same=True)))["redundant_llm_calls"]
    assert finding.severity == "critical"  # the repeat is over a fifth of each request
    evidence = finding.evidence
    assert evidence["affected_request_share"] == 1.0 and evidence["redundant_call_count"] == 10
    assert evidence["calls_per_signature_count_max"] == 2
    assert evidence["signature_key"] == "llm.prompt.sha256"
    assert finding.confidence >= 0.9


def test_different_prompts_are_not_redundant() -> None:
    assert "redundant_llm_calls" not in by_cause(diagnose(cases.repeated_prompts(same=False)))


def test_a_retry_after_a_failure_is_not_redundant() -> None:
    assert "redundant_llm_calls" not in by_cause(diagnose(cases.repeated_prompts(same=True, first_fails=True)))


def test_without_a_prompt_hash_the_signature_is_weaker() -> None:
    finding = by_cause(diagnose(cases.repeated_prompts(same=True, hashed=False)))["redundant_llm_calls"]
    assert finding.evidence["signature_key"].startswith("model+input_tokens")
    assert finding.confidence < 0.7


def test_captured_input_is_a_strong_signature_for_any_instrumentation() -> None:
    asked = '[{"role":"user","parts":[{"type":"text","content":"Where is A-1?"}]}]'
    steps = [Call(content=asked), Tool(), Call(content=asked)]
    finding = by_cause(diagnose(repeat(4, steps)))["redundant_llm_calls"]
    assert finding.evidence["signature_key"] == "input_content" and finding.confidence >= 0.85
    different = [Call(content=asked), Tool(), Call(content=asked.replace("A-1", "A-2"))]
    assert "redundant_llm_calls" not in by_cause(diagnose(repeat(4, different)))


def test_without_content_only_a_back_to_back_repeat_counts() -> None:
    assert "redundant_llm_calls" in by_cause(diagnose(repeat(4, [Call(), Call(), Call(input_tokens=700)])))
    # Two 600-token prompts with another call between them may well be different prompts.
    assert "redundant_llm_calls" not in by_cause(diagnose(repeat(4, [Call(), Call(input_tokens=700), Call()])))
