"""A healthy window yields nothing above ``info``; findings are ranked and their evidence is well formed."""

from __future__ import annotations

import json

import polars as pl
from client_cases import agent_loop, repeat
from diagnosis_support import above_info, build_all, by_cause, clean_requests, diagnose, frame

from diagnosis import RULES, Diagnoser, DiagnosisContext, Finding, diagnose_spans, rank_findings
from diagnosis.findings import confidence, evidence_key_ok, sample_factor


def test_clean_window_yields_nothing_above_info() -> None:
    report = diagnose(build_all(clean_requests()))
    assert report.trace_count == 20
    assert above_info(report) == []
    # Each of the four tokenizer workers loads once: worth knowing, not a fault.
    assert by_cause(report)["tokenizer_cold_start"].severity == "info"
    assert report.errors == []


def test_empty_window_yields_no_findings() -> None:
    empty = frame(build_all(clean_requests())).clear()
    report = diagnose_spans(empty)
    assert report.findings == [] and report.trace_count == 0 and report.errors == []


def test_a_window_without_engine_spans_is_diagnosed_from_what_it_has() -> None:
    # A hosted model: chat spans, no vLLM llm_request under them. Engine-side rules have nothing to read.
    spans = frame(build_all(clean_requests())).filter(pl.col("name") != "llm_request")
    report = diagnose_spans(spans)
    assert report.errors == [] and report.trace_count == 20
    assert [f.cause for f in report.findings] == ["tokenizer_cold_start"]


def test_findings_rank_by_severity_then_confidence() -> None:
    def finding(cause: str, severity: str, confidence: float) -> Finding:
        return Finding(cause=cause, title=cause, severity=severity, confidence=confidence, evidence={}, remedy="")  # type: ignore[arg-type]

    ranked = rank_findings(
        [
            finding("a", "info", 0.99),
            finding("b", "warning", 0.4),
            finding("c", "critical", 0.3),
            finding("d", "warning", 0.9),
        ]
    )
    assert [f.cause for f in ranked] == ["c", "d", "b", "a"]


def test_confidence_grows_with_the_sample() -> None:
    assert sample_factor(1, 10) == 0.5 and sample_factor(10, 10) == 1.0 and sample_factor(50, 10) == 1.0
    assert confidence(0.8, samples=1, full=10) == 0.4 and confidence(1.4, samples=10, full=10) == 1.0


def test_a_failing_rule_is_reported_and_the_others_still_run() -> None:
    class Broken:
        cause = "broken"
        locates_only = False
        tests_corroborate = False

        def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
            raise RuntimeError("boom")

    diagnoser = Diagnoser()
    diagnoser.rules.insert(0, Broken())  # type: ignore[arg-type]
    report = diagnoser.diagnose(DiagnosisContext(frame(build_all(clean_requests()))))
    assert [(e.cause, e.message) for e in report.errors] == [("broken", "RuntimeError: boom")]
    assert by_cause(report)["tokenizer_cold_start"].severity == "info"


def test_evidence_keys_carry_units_and_serialize(all_findings: list[Finding]) -> None:
    causes = {finding.cause for finding in all_findings}
    assert causes == set(RULES), causes
    for finding in all_findings:
        assert 0 <= finding.confidence <= 1 and finding.title and finding.remedy
        for key, value in finding.evidence.items():
            assert evidence_key_ok(key), (finding.cause, key)
            if key.endswith("_share") and value is not None:
                assert 0 <= value <= 1, (finding.cause, key, value)
        ids = finding.evidence["example_trace_ids"]
        assert isinstance(ids, list) and ids and all(len(i) == 32 for i in ids), finding.cause
        json.dumps(finding.model_dump())
    assert pl.DataFrame([f.model_dump(exclude={"evidence"}) for f in all_findings]).height == len(all_findings)


def test_a_healthy_agent_loop_seen_from_the_client_raises_nothing() -> None:
    # Client spans only: three calls a request, tools between them, context growing by each turn's messages.
    report = diagnose(repeat(10, agent_loop()))
    assert report.findings == [] and report.errors == []
