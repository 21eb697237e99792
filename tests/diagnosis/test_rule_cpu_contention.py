"""cpu_contention: every stage slowing together, named as the host's condition, and the discount it puts on the
timing evidence of the other rules."""

from __future__ import annotations

from dataclasses import replace

import diagnosis_cases as cases
from diagnosis_support import build_all, by_cause, clean_requests, diagnose, frame

from diagnosis import diagnose_spans, parse_rule_table


def test_every_service_waiting_for_a_cpu_is_contention() -> None:
    # Half the requests wait 8-25 ms in spans of all four services: 105 of 540 judged spans (0.19 >= 0.1).
    finding = by_cause(diagnose(cases.busy_host()))["cpu_contention"]
    assert finding.severity == "info"
    evidence = finding.evidence
    assert evidence["signal_source"] == "span_delays"
    assert evidence["slowed_service_names"] == ["agent", "gateway", "retriever", "tools"]
    assert evidence["delayed_span_count"] == 105 and evidence["judged_span_count"] == 540
    assert evidence["span_delay_ms_p50"] == 8.0
    assert 0.4 < finding.confidence < 0.7


def test_a_slowdown_in_some_services_only_is_not_contention() -> None:
    # An event loop that blocks delays its own spans and its caller's: two services of four are no majority.
    assert "cpu_contention" not in by_cause(diagnose(cases.busy_host(("agent", "gateway"))))
    # A step that is slow on every call moves its own baseline: nothing waits beyond it.
    assert "cpu_contention" not in by_cause(diagnose(cases.validation(3.0)))
    assert "cpu_contention" not in by_cause(diagnose(build_all(clean_requests())))


def test_measured_cpu_pressure_decides_over_the_spans() -> None:
    pressed = by_cause(diagnose(build_all(clean_requests()), cases.cpu_pressure(0.8)))["cpu_contention"]
    assert pressed.evidence["signal_source"] == "cpu_pressure" and pressed.evidence["host_name"] == "node-1"
    assert pressed.evidence["cpu_waiting_share"] == 0.8 and pressed.confidence >= 0.9
    assert "80%" in pressed.title
    # The host measured idle: the spans' delays are something else (a slow dependency shared by all, say).
    assert "cpu_contention" not in by_cause(diagnose(cases.busy_host(), cases.cpu_pressure(0.05)))


def test_a_cpu_utilization_attribute_is_read() -> None:
    spans = [replace(s, attributes={**s.attributes, "system.cpu.utilization": "0.97"}) for s in cases.busy_host(())]
    finding = by_cause(diagnose(spans))["cpu_contention"]
    assert finding.evidence["signal_source"] == "cpu_utilization"
    assert finding.evidence["cpu_utilization_share_p50"] == 0.97
    idle = [replace(s, attributes={**s.attributes, "process.cpu.utilization": "0.4"}) for s in cases.busy_host()]
    assert "cpu_contention" not in by_cause(diagnose(idle))


def test_contention_keeps_timing_only_causes_at_info() -> None:
    pressed = cases.cpu_pressure(0.8)
    # TPOT 2.3x in batches of six: critical on a quiet host, ambiguous when every stage slows in busy periods.
    quiet = by_cause(diagnose(cases.decode_heavy(batched=True)))["decode_bound"]
    busy = by_cause(diagnose(cases.decode_heavy(batched=True), pressed))["decode_bound"]
    assert quiet.severity == "critical" and busy.severity == "info"
    assert busy.evidence["tpot_growth_ratio"] == quiet.evidence["tpot_growth_ratio"]
    assert busy.evidence["cpu_contention_level_ratio"] == 1.0 and busy.confidence < quiet.confidence
    assert "max-num-seqs" in busy.remedy and "contended" in busy.remedy
    # Slow tokenize calls standing in for loading spans: reloads on a quiet host, stretched calls on a busy one.
    reloads = by_cause(diagnose(cases.tokenizer_reloads_untraced(), pressed))["tokenizer_cold_start"]
    assert reloads.severity == "info" and "may reload" in reloads.title
    # Loading spans are structure, not timing: they still decide.
    traced = by_cause(diagnose(cases.tokenizer_loads(every_call=True), pressed))["tokenizer_cold_start"]
    assert traced.severity == "warning"
    # A validation step slow on half the calls passes the median test; its least delayed calls are cheap.
    busy_step = by_cause(diagnose(cases.busy_host()))["orchestration_cpu_hotspot"]
    assert busy_step.severity == "info" and busy_step.evidence["self_ms_p5"] == 0.05
    assert by_cause(diagnose(cases.busy_host(("agent",))))["orchestration_cpu_hotspot"].severity == "warning"
    # Delayed on three calls in four (p25 over the line), its fastest calls still show the step is cheap.
    mostly_delayed = by_cause(diagnose(cases.busy_host(unhurried_every=4)))["orchestration_cpu_hotspot"]
    assert mostly_delayed.severity == "info" and mostly_delayed.evidence["self_ms_p25"] > 1.0, mostly_delayed


def test_a_blocking_call_needs_more_calls_on_a_busy_host() -> None:
    pressed = cases.cpu_pressure(0.8)
    # Seven frozen calls of seven: clear on any host, with the confidence discounted for the contention.
    quiet = by_cause(diagnose(cases.loop_blocking(35.0)))["event_loop_blocking"]
    busy = by_cause(diagnose(cases.loop_blocking(35.0), pressed))["event_loop_blocking"]
    assert busy.severity == quiet.severity == "critical" and busy.confidence < quiet.confidence
    # Two frozen calls of two beside three of the process's calls that never froze: at the chance rate those
    # leave (Jeffreys: 0.5 / 4) two of two happen once in 64 windows, not evidence at 0.01 on a quiet host; on a
    # busy one, two calls are too few to judge at all.
    two = cases.loop_blocking(35.0, count=3)
    quiet_two = by_cause(diagnose(two))["event_loop_blocking"]
    assert quiet_two.severity == "info" and str(quiet_two.tests[0].why_not).startswith("could be chance")
    maybe = by_cause(diagnose(two, pressed))["event_loop_blocking"]
    assert maybe.severity == "info" and "may block" in maybe.title
    assert str(maybe.tests[0].why_not).startswith("too few")


def test_with_the_rule_disabled_no_discount_is_made() -> None:
    table = parse_rule_table({"rules": {"cpu_contention": {"enabled": False}}})
    report = diagnose_spans(frame(cases.decode_heavy(batched=True)), table=table, metrics=cases.cpu_pressure(0.8))
    assert by_cause(report)["decode_bound"].severity == "critical" and "cpu_contention" not in by_cause(report)
    assert report.errors == []
