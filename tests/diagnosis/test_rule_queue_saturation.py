"""queue_saturation: the llm.queue stage's share of latency, corroborated by concurrency and metrics."""

from __future__ import annotations

import diagnosis_cases as cases
import numpy as np
from diagnosis_support import above_info, build_all, by_cause, clean_requests, diagnose

from diagnosis import EngineMetrics, GaugeSamples


def _waiting(values: list[float]) -> EngineMetrics:
    times = np.arange(len(values), dtype=np.float64)
    return EngineMetrics(
        source="http://prometheus.test",
        num_requests_waiting=GaugeSamples(times, np.asarray(values, dtype=np.float64)),
        kv_cache_usage=GaugeSamples(times, np.full(len(values), 0.4)),
    )


def test_queueing_that_grows_with_arrivals_is_critical() -> None:
    # Queue 25, 50, ... 300 ms per call against ~70 ms of work: well over the 25% critical share.
    finding = by_cause(diagnose(cases.queue_saturation(25.0)))["queue_saturation"]
    assert finding.severity == "critical"
    evidence = finding.evidence
    assert evidence["queue_share"] > 0.5
    assert evidence["queue_ms_max"] == 300.0
    assert evidence["queue_vs_in_flight_correlation"] > 0.9
    assert evidence["llm_call_count"] == 12
    assert evidence["example_trace_ids"][0] == f"{12:032x}"  # the last arrival waited longest
    assert "max-num-seqs" in finding.remedy


def test_metrics_raise_confidence_and_name_the_limit() -> None:
    spans = cases.queue_saturation(25.0)
    without = by_cause(diagnose(spans))["queue_saturation"]
    with_metrics = by_cause(diagnose(spans, _waiting([3, 4, 5, 2, 6, 0])))["queue_saturation"]
    assert with_metrics.confidence > without.confidence
    assert with_metrics.evidence["waiting_nonzero_share"] == round(5 / 6, 3)
    assert with_metrics.evidence["kv_cache_usage_max_share"] == 0.4


def test_brief_queueing_is_not_saturation() -> None:
    # 0.1 ms more per arrival: at most 1.2 ms of queue in ~75 ms requests, far under the 10% warning share.
    assert "queue_saturation" not in by_cause(diagnose(cases.queue_saturation(0.1)))


def test_sustained_waiting_in_metrics_alone_is_a_low_confidence_warning() -> None:
    report = diagnose(build_all(clean_requests()), _waiting([1, 2, 1, 3, 1, 0, 2, 1]))
    finding = by_cause(report)["queue_saturation"]
    assert finding.severity == "warning" and finding.confidence <= 0.5
    clean_metrics = diagnose(build_all(clean_requests()), _waiting([0, 0, 1, 0, 0, 0, 0, 0]))
    assert above_info(clean_metrics) == []
