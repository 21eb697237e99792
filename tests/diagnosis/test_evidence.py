"""diagnosis.evidence: the three gates (counts, significance, effect), their calibration under no difference, and
the comparison issue 29 saw raise a warning on the stack's default workload."""

from __future__ import annotations

import diagnosis_cases as cases
import numpy as np
from diagnosis_support import frame
from scipy import stats

from diagnosis import Diagnoser, DiagnosisContext, Finding, Severity, rank_findings
from diagnosis.evidence import (
    ALPHA,
    above_chance,
    capped,
    higher_rate,
    joint_confidence,
    larger_share,
    larger_values,
    median_above,
)
from diagnosis.rules.decode_bound import DecodeBound


def test_the_issue_29_comparison_is_no_evidence() -> None:
    # The lower tier went from 7 to 11 requests between the halves ("traffic grew 6.1x" by requests in flight),
    # the higher tier's p95 from 230 to 330 ms over 19 requests split in two.
    arrivals = higher_rate("P2 arrivals", 7, 11, min_count=3, min_effect_ratio=1.5)
    assert arrivals.p_value > 0.2 and not arrivals.significant
    assert arrivals.why_not is not None and arrivals.why_not.startswith("could be chance")
    first = [180, 190, 200, 205, 210, 215, 220, 225, 230]
    second = [185, 195, 200, 210, 215, 230, 240, 250, 290, 330]
    latency = larger_values("P0 latency", first, second, min_count=5, min_effect_ratio=1.5, quantile=0.95)
    assert not latency.significant
    assert capped("warning", (arrivals, latency)) == "info"


def test_each_gate_says_why() -> None:
    few = larger_values("x", [1.0, 2.0], [10.0, 20.0, 30.0], min_count=3, min_effect_ratio=1.5)
    assert not few.enough and few.p_value == 1.0 and few.why_not is not None and few.why_not.startswith("too few")
    rng = np.random.default_rng(7)
    base = rng.lognormal(mean=5.0, sigma=0.3, size=5_000)
    small = larger_values("x", base, base * 1.05, min_count=5, min_effect_ratio=1.5)
    # Thousands of requests make a 5% shift significant; it is still no one's problem.
    assert small.p_value < ALPHA and not small.significant
    assert small.why_not is not None and small.why_not.startswith("too small")
    real = larger_values("x", base[:20], base[20:40] * 3, min_count=5, min_effect_ratio=1.5)
    assert real.significant and real.why_not is None and real.effect_ratio is not None and real.effect_ratio > 2


def test_tries_share_the_level() -> None:
    # Seven against seven, perfectly separated: p = 1/3432 = 2.9e-4 one-sided. Evidence among 12 comparisons
    # (level 0.01 / 12 = 8.3e-4), not among 40 (2.5e-4).
    first, second = list(range(1, 8)), list(range(101, 108))
    assert larger_values("x", first, second, min_count=5, min_effect_ratio=1.5, tries=12).significant
    assert not larger_values("x", first, second, min_count=5, min_effect_ratio=1.5, tries=40).significant


def test_no_difference_is_evidence_at_most_at_the_level() -> None:
    # 2,000 comparisons of two samples of one lognormal latency distribution (20 and 20), 2,000 of one Poisson
    # rate over equal halves, 2,000 of one drop share: each test finds "evidence" in at most ALPHA of them (plus
    # three binomial standard deviations of sampling), and with no effect gate (min ratio 1).
    rng = np.random.default_rng(29)
    trials = 2_000
    bound = stats.binom.ppf(0.999, trials, ALPHA)
    latency = sum(
        larger_values(
            "x", rng.lognormal(5, 0.8, 20), rng.lognormal(5, 0.8, 20), min_count=5, min_effect_ratio=1.0
        ).significant
        for _ in range(trials)
    )
    rate = sum(
        higher_rate("x", *rng.poisson(20, 2), min_count=3, min_effect_ratio=1.0).significant for _ in range(trials)
    )
    share = sum(
        larger_share(
            "x", (int(rng.binomial(30, 0.1)), 30), (int(rng.binomial(30, 0.1)), 30), min_count=5, min_rise=0.0
        ).significant
        for _ in range(trials)
    )
    assert max(latency, rate, share) <= bound, (latency, rate, share, bound)


def test_above_chance_uses_the_rate_seen_elsewhere() -> None:
    # Two frozen calls out of two where the process's other calls froze 3 times in 100: not chance.
    assert above_chance("x", 2, 2, chance=(3, 100), min_count=2, min_effect_ratio=2.0).significant
    # Where they froze 60 times in 100, two out of two is what chance gives.
    assert not above_chance("x", 2, 2, chance=(60, 100), min_count=2, min_effect_ratio=2.0).significant


def test_confidence_is_the_product_of_one_minus_p() -> None:
    a = higher_rate("x", 0, 30, min_count=3, min_effect_ratio=1.5)
    b = larger_share("x", (0, 40), (10, 40), min_count=5, min_rise=0.05)
    assert joint_confidence((a, b)) == round((1 - a.p_value) * (1 - b.p_value), 2) >= 0.99
    assert joint_confidence(()) == 1.0


def _finding(cause: str, severity: Severity, confidence: float, share: float | None) -> Finding:
    return Finding(
        cause=cause,
        title=cause,
        severity=severity,
        confidence=confidence,
        evidence={"example_trace_ids": []},
        remedy="-",
        latency_share=share,
    )


def test_the_finding_that_explains_most_latency_leads_its_severity() -> None:
    # No locating rule named here: info findings rank by the latency they explain too.
    ranked = rank_findings(
        [
            _finding("connection_setup_per_request", "warning", 0.99, 0.04),
            _finding("queue_saturation", "warning", 0.8, 0.2),
            _finding("oversized_payload", "warning", 0.95, None),
            _finding("decode_bound", "info", 0.6, 0.7),
            _finding("llm_bound", "info", 0.7, 0.9),
            _finding("provider_throttling", "critical", 0.7, 0.01),
        ]
    )
    assert [f.cause for f in ranked] == [
        "provider_throttling",
        "queue_saturation",
        "connection_setup_per_request",
        "oversized_payload",
        "llm_bound",
        "decode_bound",
    ]


def test_a_comparison_without_evidence_cannot_outrank_one_with_it() -> None:
    # The issue 29 case: a starvation "warning" on 7 -> 11 arrivals beside a queue that is a fifth of latency.
    weak = higher_rate("P2 arrivals", 7, 11, min_count=3, min_effect_ratio=1.5)
    starving = _finding("admission_tier_starvation", capped("warning", [weak]), joint_confidence([weak]), 0.3)
    queue = _finding("queue_saturation", "warning", 0.9, 0.2)
    assert [f.cause for f in rank_findings([starving, queue])] == ["queue_saturation", "admission_tier_starvation"]


def test_an_info_finding_whose_comparison_failed_comes_after_the_other_info_findings() -> None:
    # The served matrix's decode_bound run: the starvation comparison (p just over its level) had 0.97 and led
    # the decode finding the fault is about.
    near = larger_values("P0 latency", list(range(10, 20)), list(range(14, 24)), min_count=4, min_effect_ratio=1.5)
    assert not near.significant and joint_confidence([near]) > 0.8
    starving = _finding("admission_tier_starvation", "info", joint_confidence([near]), None)
    starving = starving.model_copy(update={"tests": [near]})
    decode = _finding("decode_bound", "info", 0.8, 0.7)
    assert [f.cause for f in rank_findings([starving, decode])] == ["decode_bound", "admission_tier_starvation"]


def test_a_failed_corroboration_does_not_rank_a_measured_share_after_a_stall_of_nothing() -> None:
    # The served azure-conv decode_bound run beside the neighbour, Prometheus on: decode was 96 % of latency, its
    # TPOT-growth test failed on the effect (1.21 < 1.3, p = 1e-6), and a blocking call stalling 0 % of latency,
    # whose binomial test passed (here: resting on none, which ranks the same), led.
    grows = larger_values("TPOT", list(range(100, 119)), list(range(121, 140)), min_count=8, min_effect_ratio=1.3)
    assert not grows.significant
    decode = _finding("decode_bound", "info", 0.8, 0.956).model_copy(update={"tests": [grows]})
    stall = _finding("event_loop_blocking", "info", 0.65, 0.0)
    assert DecodeBound.tests_corroborate
    assert [f.cause for f in rank_findings([stall, decode], (), {"decode_bound"})] == [
        "decode_bound",
        "event_loop_blocking",
    ]
    assert [f.cause for f in rank_findings([stall, decode])] == ["event_loop_blocking", "decode_bound"]


def test_where_latency_goes_ranks_after_why() -> None:
    # The served matrix's decode_bound run: llm_bound (0.93) led the decode finding the fault is about (0.80).
    findings = [_finding("llm_bound", "info", 0.93, 0.9), _finding("decode_bound", "info", 0.8, 0.7)]
    assert [f.cause for f in rank_findings(findings, {"llm_bound"})] == ["decode_bound", "llm_bound"]
    report = Diagnoser().diagnose(DiagnosisContext(frame(cases.decode_heavy(batched=False))))
    causes = [f.cause for f in report.findings if f.severity == "info"]
    assert "llm_bound" not in causes or causes.index("llm_bound") == len(causes) - 1


def test_a_median_just_over_the_line_is_no_evidence_of_the_cost() -> None:
    # The Codex CLI's instructions.load: 9 of 16 calls over 1 ms, p50 1.18 ms (sign test p = 0.40).
    values = [0.3, 0.4, 0.6, 0.8, 0.85, 0.9, 0.95, 1.1, 1.2, 1.25, 1.3, 1.4, 1.6, 1.9, 2.2, 2.4]
    test = median_above("costs over 1 ms", values, 1.0, min_count=5)
    assert test.counts == (7, 9) and not test.significant and test.p_value > 0.3
    # A step over the line on every call (the per-call schema rebuild: 3-9 ms).
    steady = median_above("costs over 1 ms", [3.4 + 0.1 * i for i in range(20)], 1.0, min_count=5)
    assert steady.significant and steady.p_value < 1e-5 and steady.effect_ratio and steady.effect_ratio > 3
    assert not median_above("costs over 1 ms", [5.0] * 4, 1.0, min_count=5).significant
