"""repeated_tool_calls: the same tool with the same arguments run again within one request."""

from __future__ import annotations

from client_cases import Call, Tool, repeat
from diagnosis_support import by_cause, diagnose

LOOKUP = Tool(name="lookup_order", arguments='{"order_id":"A-1"}', duration_ms=100.0)


def test_the_same_tool_call_twice() -> None:
    finding = by_cause(diagnose(repeat(4, [Call(), LOOKUP, LOOKUP, Call(input_tokens=700)])))["repeated_tool_calls"]
    evidence = finding.evidence
    assert evidence["repeated_call_count"] == 4 and evidence["affected_request_share"] == 1.0
    assert evidence["tool_names"] == ["lookup_order"] and evidence["calls_per_signature_count_max"] == 2
    # 100 ms of a 625 ms request.
    assert evidence["wasted_share"] == 0.16 and finding.severity == "warning"
    assert finding.confidence >= 0.85


def test_other_arguments_are_another_call() -> None:
    other = Tool(name="lookup_order", arguments='{"order_id":"A-2"}', duration_ms=100.0)
    assert "repeated_tool_calls" not in by_cause(diagnose(repeat(4, [Call(), LOOKUP, other])))


def test_a_retry_after_a_failure_is_not_a_repeat() -> None:
    failed = Tool(name="lookup_order", arguments='{"order_id":"A-1"}', status="Error")
    assert "repeated_tool_calls" not in by_cause(diagnose(repeat(4, [Call(), failed, LOOKUP])))


def test_without_captured_arguments_calls_cannot_be_told_equal() -> None:
    blind = Tool(name="lookup_order", arguments=None)
    assert "repeated_tool_calls" not in by_cause(diagnose(repeat(4, [Call(), blind, blind])))


def test_the_same_call_in_different_requests_is_fine() -> None:
    assert "repeated_tool_calls" not in by_cause(diagnose(repeat(4, [Call(), LOOKUP, Call(input_tokens=700)])))
