"""admission_tier_starvation: a lower tier's traffic rises while a higher tier gets slower or dropped."""

from __future__ import annotations

import math

from diagnosis_cases import captured_tier_requests, small_tier_surges, tier_burst, tier_window
from diagnosis_support import by_cause, diagnose, frame

from analysis.tree import build_tree
from diagnosis.tiers import TierSettings, tier_stats, tiered_requests


def test_a_rising_low_tier_starving_the_high_tier() -> None:
    window = tier_window(p2_first=1, p2_second=24, p0_queue_second_ms=60.0, p0_per_half=16)
    finding = by_cause(diagnose(window))["admission_tier_starvation"]
    evidence = finding.evidence
    assert (evidence["higher_tier_name"], evidence["lower_tier_name"]) == ("P0", "P2")
    # Counted while P0 requests started (0-1940 ms): 1 P2 request in the first half, 22 of 24 in the second.
    assert (evidence["lower_first_half_count"], evidence["lower_second_half_count"]) == (1, 22)
    # Eight against eight with 1 -> 10 P2 arrivals: the arrivals' rise could be chance (p = 0.006).
    weak = by_cause(diagnose(tier_window(p2_first=1, p2_second=12, p0_queue_second_ms=60.0)))
    assert weak["admission_tier_starvation"].severity == "info"
    assert evidence["higher_latency_growth_ratio"] > 2.0 and finding.severity == "critical"
    assert evidence["tier_names"] == ["P0", "P2"] and evidence["operation_names"] == ["gateway POST /v1/agent"]
    assert len(evidence["example_trace_ids"]) == 3


def test_a_first_half_request_already_caught_does_not_hide_the_starving() -> None:
    # Two of the first half's eight P0 requests already wait as long as the second half's: the half's p95 is the
    # wait, its median is not.
    evidence = by_cause(diagnose(tier_window(1, 12, p0_queue_second_ms=60.0, p0_caught_first=2)))[
        "admission_tier_starvation"
    ].evidence
    assert evidence["higher_second_half_ms_p95"] / evidence["higher_first_half_ms_p95"] < 1.5
    assert evidence["higher_second_half_ms_p50"] / evidence["higher_first_half_ms_p50"] >= 1.5


def test_a_short_flood_in_one_half_is_found_by_comparing_the_requests_alongside_it() -> None:
    # Four P0 requests started while twelve P2 requests were in flight, 30 before or after: the halves hardly
    # differ, the requests alongside the flood against the others do.
    finding = by_cause(diagnose(tier_burst(p0_queue_alongside_ms=300.0)))["admission_tier_starvation"]
    evidence = finding.evidence
    assert evidence["comparison_name"] == "lower_surge" and finding.severity == "critical"
    assert evidence["higher_first_half_ms_p50"] * 2 < evidence["higher_second_half_ms_p50"]
    first, second = (evidence[f"lower_{half}_half_recent_arrivals_count_mean"] for half in ("first", "second"))
    assert first < 3 <= second
    assert finding.title.startswith("Tier P0's requests started after a surge of tier P2's")
    # The same flood with the P0 requests alongside it as fast as the others: priority admission working.
    assert "admission_tier_starvation" not in by_cause(diagnose(tier_burst(p0_queue_alongside_ms=1.0)))


def test_every_tier_bursting_together_is_load_not_starvation() -> None:
    # The same P2 flood with as many P0 requests arriving among it, as slow: the P0 requests after the surge are
    # slow because everything arrived at once, not because tier P2 took their capacity (the mooncake replay's
    # interleaved tiers gave a critical false alarm this way).
    findings = by_cause(diagnose(tier_burst(p0_queue_alongside_ms=300.0, p0_burst=12)))
    assert "admission_tier_starvation" not in findings


def test_the_higher_tiers_users_opening_beside_a_flood_do_not_hide_it() -> None:
    # The demo's workload under the tier flood, as served (diagnosis_matrix.py, Prometheus off): six closed-loop
    # users open at once and 240 P2 requests arrive over the next 6 s, filling the whole 12 s window. Within the
    # flood's holding time (5.3 s) the users' opening burst is there too: 11 of their arrivals against their usual
    # 7, beside 56 of the flood's against its usual 22. The flood added far more; it is still the P2 tier's.
    finding = by_cause(diagnose(captured_tier_requests("demo_tier_flood.csv")))["admission_tier_starvation"]
    evidence = finding.evidence
    assert (evidence["comparison_name"], evidence["lower_tier_name"]) == ("lower_surge", "P2")
    assert finding.severity == "critical" and all(test.significant for test in finding.tests)
    assert evidence["higher_second_half_ms_p50"] > 2 * evidence["higher_first_half_ms_p50"]
    # The surge itself is tested against the tier's usual arrivals, as every comparison by load's is.
    surge = finding.tests[-1]
    assert surge.name == "poisson_rate" and surge.counts[1] > 5 * surge.counts[0]


def test_a_surge_kept_only_beside_the_others_rising_must_itself_be_more_than_chance() -> None:
    # The other tiers' arrivals rose 1.5x beside each P2 surge (one P0 arrival), so only the exception for a lower
    # tier that added far more keeps the surge (3 added against their 2). Three arrivals against none could be chance
    # (p = 0.125): the in-process tokenizer cold start once named such a surge at a run's start above its cause.
    finding = by_cause(diagnose(small_tier_surges()))["admission_tier_starvation"]
    latency, surge = finding.tests
    assert finding.evidence["comparison_name"] == "lower_surge" and latency.significant
    assert (surge.name, surge.counts, surge.significant) == ("poisson_rate", (0, 3), False)
    assert finding.severity == "info"


def test_the_tiers_above_a_flood_are_judged_together_when_each_has_a_handful() -> None:
    # The demo's workload under the tier flood, quiet, as served (diagnosis_matrix.py, Prometheus off, 2026-12-05):
    # the flood fills the first half of a 12 s window, beside 13 P0 and 14 P1 requests. Each tier 7-8x slower in the
    # loaded half reached p = 0.004 alone against a level of 0.0025 (0.01 over the four pairs and ways that crossed
    # the thresholds); together, p = 0.0001.
    finding = by_cause(diagnose(captured_tier_requests("demo_tier_flood_few_users.csv")))["admission_tier_starvation"]
    evidence = finding.evidence
    assert (evidence["higher_tier_name"], evidence["lower_tier_name"]) == ("P0+P1", "P2")
    assert evidence["higher_request_count"] == 27
    assert finding.severity == "critical" and all(test.significant for test in finding.tests)


def test_a_flood_in_the_first_half_is_the_same_starving() -> None:
    # The same served run beside the CPU neighbour: the flood and its backlog fill the first 11 s of 15 (P0 and P1
    # at 8.3-9.1 s), the rest is calm (0.2-1.1 s). The P2 tier's holding time (its p90, 9 s) reaches past the
    # backlog, so the comparison by load blurs; the halves, read from the loaded one, do not.
    finding = by_cause(diagnose(captured_tier_requests("demo_tier_flood_neighbour.csv")))["admission_tier_starvation"]
    evidence = finding.evidence
    assert (evidence["comparison_name"], evidence["lower_tier_name"]) == ("halves_receding", "P2")
    assert evidence["lower_second_half_count"] > 5 * evidence["lower_first_half_count"]
    assert finding.severity == "critical" and all(test.significant for test in finding.tests)
    assert "higher in the first half; as it fell" in finding.title


def test_drops_of_the_high_tier_count_as_starving() -> None:
    window = tier_window(p2_first=0, p2_second=30, p0_queue_second_ms=1.0, p0_drops_second=9, p0_per_half=24)
    finding = by_cause(diagnose(window))["admission_tier_starvation"]
    assert finding.evidence["higher_second_half_dropped_share"] == 0.375 and finding.severity == "critical"
    dropped = finding.tests[0]
    assert (dropped.name, sum(dropped.counts), dropped.significant) == ("fisher_exact", 48, True)
    assert all(test.significant for test in finding.tests)
    assert finding.confidence == round(math.prod(1 - test.p_value for test in finding.tests), 2) >= 0.99


def test_drops_too_few_to_tell_from_chance_are_info_with_their_numbers() -> None:
    # The same share, 3 of 8 against 0 of 8 (Fisher's one-sided p = 0.1): it could be chance.
    finding = by_cause(diagnose(tier_window(p2_first=0, p2_second=10, p0_queue_second_ms=1.0, p0_drops_second=3)))[
        "admission_tier_starvation"
    ]
    assert finding.evidence["higher_second_half_dropped_share"] == 0.375 and finding.severity == "info"
    assert finding.tests[0].why_not is not None and finding.tests[0].why_not.startswith("could be chance")
    assert finding.confidence < 0.95


def test_steady_low_tier_or_unaffected_high_tier_is_fine() -> None:
    # The low tier steady while the high tier slows: something else slowed it.
    assert "admission_tier_starvation" not in by_cause(diagnose(tier_window(6, 6, p0_queue_second_ms=60.0)))
    # The low tier rises and the high tier does not suffer: priority admission working.
    assert "admission_tier_starvation" not in by_cause(diagnose(tier_window(1, 12, p0_queue_second_ms=1.0)))


def test_per_tier_latency_and_drops() -> None:
    tree = build_tree(frame(tier_window(2, 4, p0_queue_second_ms=1.0, p0_drops_second=2)))
    stats = tier_stats(tiered_requests(tree, TierSettings(("gateway.priority_tier",), (), (429,), ())))
    assert stats["tier"].to_list() == ["P0", "P2"] and stats["request_count"].to_list() == [16, 6]
    assert stats["dropped_count"].to_list() == [2, 0] and stats["latency_ms_p95"][0] >= stats["latency_ms_p50"][0]
