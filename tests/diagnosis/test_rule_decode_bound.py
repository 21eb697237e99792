"""decode_bound: decode leading latency (info), and TPOT growing with the decoding batch (the cause)."""

from __future__ import annotations

from dataclasses import replace

import diagnosis_cases as cases
from diagnosis_support import build_all, by_cause, clean_requests, diagnose


def test_long_outputs_alone_are_info() -> None:
    finding = by_cause(diagnose(cases.decode_heavy(batched=False)))["decode_bound"]
    assert finding.severity == "info"
    evidence = finding.evidence
    assert evidence["decode_share"] > 0.8
    assert evidence["tpot_growth_ratio"] is None  # one call at a time: nothing to compare
    assert evidence["length_capped_share"] == 1.0
    assert "max-num-seqs" not in finding.remedy


def test_tpot_growing_with_batch_is_critical() -> None:
    # Twelve calls alone decode 40 tokens in 300 ms, eight at once in 700 ms: TPOT 2.3x in the batch of eight.
    finding = by_cause(diagnose(cases.decode_heavy(batched=True)))["decode_bound"]
    assert finding.severity == "critical"
    evidence = finding.evidence
    assert evidence["tpot_growth_ratio"] == round(700 / 300, 3)
    assert evidence["tpot_vs_batch_correlation"] > 0.8
    assert evidence["decoding_batch_count_max"] == 8.0
    assert "max-num-seqs" in finding.remedy


def test_decode_that_does_not_lead_is_not_reported() -> None:
    # 200 ms tool calls make the tool stage the largest: decode (about a fifth) is not where the time goes.
    tool_heavy = build_all(replace(request, tool_ms=200.0) for request in clean_requests())
    assert "decode_bound" not in by_cause(diagnose(tool_heavy))
