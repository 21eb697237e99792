"""An incident's findings against its baseline window's (:func:`query.anomaly.compare_findings`): a cause is new
when its severity rose, or when, at the same severity, its share of end-to-end latency rose by ten points or more.
The numbers are the decode_bound finding's on the stack (a baseline of five clean minutes, a clean minute, the
minute of the decode_bound fault: eight times the output tokens), measured with ``tests/diagnosis``'s captures.
"""

from __future__ import annotations

import inspect

import pytest

from analysis import STAGES
from diagnosis import CAUSE_STAGES, LATENCY_SHARE_EVIDENCE, RULES, DiagnosisReport, Finding, Severity
from query.anomaly import compare_findings


def _report(*findings: Finding) -> DiagnosisReport:
    return DiagnosisReport(findings=list(findings), trace_count=24)


def _decode(share: float, severity: Severity = "info") -> Finding:
    return Finding(
        cause="decode_bound",
        title=f"Decode is {share:.0%} of latency",
        severity=severity,
        confidence=0.7,
        evidence={"decode_share": share},
        remedy="Cap max_tokens.",
    )


BASELINE = _report(_decode(0.727))


@pytest.mark.parametrize(
    ("window", "new"),
    [
        (_decode(0.752), False),
        (_decode(0.913), True),
        (_decode(0.913, "warning"), True),
        (_decode(0.5), False),
    ],
    ids=["clean minute", "fault minute", "severity rose", "share fell"],
)
def test_a_finding_is_new_when_its_severity_or_its_share_of_latency_rose(window: Finding, new: bool) -> None:
    (found,) = compare_findings(_report(window), BASELINE)
    assert found["new"] is new
    assert found["baseline_title"] == "Decode is 73% of latency"


def test_on_an_incident_of_its_stage_any_rise_of_the_share_makes_the_finding_new() -> None:
    # A live minute the decode_bound fault filled half of: llm.decode's p95 deviated x3.3, decode's share 76 -> 83%.
    window, baseline = _report(_decode(0.83)), _report(_decode(0.76))
    assert compare_findings(window, baseline)[0]["new"] is False
    assert compare_findings(window, baseline, {"llm.decode"})[0]["new"] is True
    assert compare_findings(window, baseline, {"llm.queue"})[0]["new"] is False
    assert compare_findings(_report(_decode(0.74)), baseline, {"llm.decode"})[0]["new"] is False


def test_a_finding_the_baseline_had_at_a_higher_severity_is_not_new_whatever_its_share() -> None:
    (found,) = compare_findings(_report(_decode(0.95)), _report(_decode(0.5, "warning")))
    assert found["new"] is False


def test_a_cause_absent_from_the_baseline_is_new_and_has_no_baseline_title() -> None:
    (found,) = compare_findings(_report(_decode(0.6)), _report())
    assert found["new"] is True
    assert found["baseline_title"] is None


def test_every_latency_share_key_and_stage_is_one_its_rule_reports() -> None:
    assert "decode_bound" in LATENCY_SHARE_EVIDENCE
    for cause, key in LATENCY_SHARE_EVIDENCE.items():
        assert f'"{key}": ' in inspect.getsource(RULES[cause].evaluate), (cause, key)
    assert CAUSE_STAGES["decode_bound"] == "llm.decode"
    for cause, stage in CAUSE_STAGES.items():
        assert stage in STAGES and cause in LATENCY_SHARE_EVIDENCE, (cause, stage)
        assert f'stage_share("{stage}")' in inspect.getsource(RULES[cause].evaluate), (cause, stage)
