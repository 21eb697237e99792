"""retrieval_topk_blowup: top-K far above normal and payload decoding dominating retrieval."""

from __future__ import annotations

import diagnosis_cases as cases
from diagnosis_support import build_all, by_cause, clean_requests, diagnose


def test_huge_top_k_decoded_per_hit() -> None:
    finding = by_cause(diagnose(cases.retrieval(200, 40.0)))["retrieval_topk_blowup"]
    assert finding.severity == "critical"  # retrieval calls are over a quarter of latency
    evidence = finding.evidence
    assert evidence["top_k_count_p50"] == 200.0
    assert evidence["deserialize_ms_p50"] == 40.0 and evidence["deserialize_share"] > 0.9
    assert evidence["retrieval_call_ms_p50"] > evidence["retrieval_ms_p50"]  # the call includes transport
    assert finding.confidence == 1.0


def test_a_large_but_cheap_top_k_is_info() -> None:
    finding = by_cause(diagnose(cases.retrieval(200, 0.05)))["retrieval_topk_blowup"]
    assert finding.severity == "info" and finding.evidence["retrieval_share"] < 0.05


def test_normal_retrieval_is_fine() -> None:
    assert "retrieval_topk_blowup" not in by_cause(diagnose(build_all(clean_requests())))
