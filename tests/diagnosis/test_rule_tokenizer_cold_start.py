"""tokenizer_cold_start: loading the tokenizer on every call versus once per worker."""

from __future__ import annotations

import diagnosis_cases as cases
from diagnosis_support import by_cause, diagnose


def test_loading_on_every_call_is_a_warning() -> None:
    # 5 ms per load in ~70 ms requests: every call reloads, at about 7% of latency (under the 10% critical).
    finding = by_cause(diagnose(cases.tokenizer_loads(every_call=True)))["tokenizer_cold_start"]
    assert finding.severity == "warning"
    evidence = finding.evidence
    assert evidence["reload_share"] == 1.0
    assert evidence["cold_call_count"] == 16 and evidence["worker_count"] == 4
    assert evidence["load_ms_p50"] == 5.01
    assert evidence["load_span_count"] == 16
    assert 0.05 < evidence["cold_start_share"] < 0.1


def test_slow_loads_on_every_call_are_critical() -> None:
    finding = by_cause(diagnose(cases.tokenizer_loads(every_call=True, load_ms=20.0)))["tokenizer_cold_start"]
    assert finding.severity == "critical" and finding.evidence["cold_start_share"] >= 0.1


def test_loading_once_per_worker_is_info() -> None:
    finding = by_cause(diagnose(cases.tokenizer_loads(every_call=False)))["tokenizer_cold_start"]
    assert finding.severity == "info"
    assert finding.evidence["cold_call_count"] == 4 and finding.evidence["reload_share"] == 0.0


def test_without_loading_spans_slow_calls_stand_in() -> None:
    first_only = by_cause(diagnose(cases.tokenizer_loads(every_call=False, traced=False)))["tokenizer_cold_start"]
    assert first_only.severity == "info" and first_only.evidence["load_span_count"] == 0
    # Eight of the twelve calls after a worker's first are 8 ms slower: 0.67 >= 0.5.
    reloads = by_cause(diagnose(cases.tokenizer_reloads_untraced()))["tokenizer_cold_start"]
    assert reloads.severity == "warning" and reloads.evidence["reload_share"] == 0.667
