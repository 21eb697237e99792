"""orchestration_cpu_hotspot: a CPU-bound step in the agent's own code."""

from __future__ import annotations

import diagnosis_cases as cases
from diagnosis_support import build_all, by_cause, clean_requests, diagnose


def test_slow_tool_argument_validation() -> None:
    finding = by_cause(diagnose(cases.validation(3.0)))["orchestration_cpu_hotspot"]
    assert finding.severity == "warning"
    evidence = finding.evidence
    assert (evidence["service_name"], evidence["span_name"]) == ("agent", "validate_tool_args")
    assert evidence["self_ms_p50"] == 3.0 and evidence["over_threshold_share"] == 1.0
    assert evidence["call_count"] == 20


def test_sub_millisecond_steps_are_not_hotspots() -> None:
    # 0.3 ms per call: under 1 ms, and 20 calls of it stay well under 5% of latency.
    assert "orchestration_cpu_hotspot" not in by_cause(diagnose(cases.validation(0.3)))


def test_decoding_inside_retrieval_belongs_to_retrieval() -> None:
    found = by_cause(diagnose(cases.retrieval(4, 30.0)))
    assert "orchestration_cpu_hotspot" not in found
    assert found["retrieval_topk_blowup"].evidence["deserialize_share"] > 0.9


def test_a_step_slow_on_some_calls_only_is_worth_knowing() -> None:
    # 20 requests validate in 3 ms, 12 others in 0.05 ms: the p50 is 3 ms, but 20 of 32 calls over the line do
    # not show the typical call costs it (sign test p = 0.11), so the finding keeps its numbers at info.
    mixed = cases.validation(3.0) + build_all(clean_requests(12, first_trace=100))
    finding = by_cause(diagnose(mixed))["orchestration_cpu_hotspot"]
    assert finding.severity == "info" and finding.evidence["call_count"] == 32
    (test,) = finding.tests
    assert test.name == "sign_test" and test.counts == (12, 20) and not test.significant
