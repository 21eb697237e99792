"""provider_throttling: 429/5xx answers to model calls, and the time the client spent waiting and retrying."""

from __future__ import annotations

from client_cases import Call, ClientRequest, Tool, build_all, repeat
from diagnosis_support import by_cause, diagnose


def test_refused_attempts_retried_by_the_sdk() -> None:
    # Each request: one call refused once (429), one refused twice (429, 503), 50 ms of waiting after each.
    steps = [Call(attempts=(429, 200)), Tool(), Call(attempts=(429, 503, 200), retry_after="1")]
    finding = by_cause(diagnose(repeat(3, steps)))["provider_throttling"]
    evidence = finding.evidence
    assert (evidence["throttled_call_count"], evidence["throttled_attempt_count"]) == (6, 9)
    assert evidence["retry_count"] == 9 and evidence["failed_call_count"] == 0
    assert evidence["attempts_per_call_count_max"] == 3 and evidence["http_status_names"] == ["429", "503"]
    # Lost per call: from the first refused attempt to the next one served: 55 ms, 110 ms; 165 of 470 ms.
    assert evidence["lost_ms_total"] == 495.0 and evidence["lost_ms_p50"] == 82.5
    assert evidence["retry_after_s_p50"] == 1.0
    assert evidence["lost_share"] == 0.351 and finding.severity == "critical"


def test_a_call_that_never_got_through() -> None:
    steps = [Call(attempts=(429, 429, 429), status="Error"), Tool(duration_ms=2000.0), Call()]
    finding = by_cause(diagnose(repeat(3, steps)))["provider_throttling"]
    assert finding.evidence["failed_call_count"] == 3 and finding.severity == "warning"


def test_without_http_spans_the_call_span_tells_its_status() -> None:
    # A framework that retries by making a new call: the refused call carries error.type 429.
    steps = [Call(attempts=None, status="Error", duration_ms=10.0), Call(attempts=None)]
    finding = by_cause(diagnose(repeat(3, steps)))["provider_throttling"]
    assert finding.evidence["throttled_attempt_count"] == 3 and finding.evidence["lost_ms_p50"] == 10.0


def test_a_single_refusal_in_the_window_is_a_blip() -> None:
    served = [ClientRequest(trace=i, start_ms=i * 5_000.0, steps=[Call(), Tool(), Call()]) for i in range(3)]
    refused = ClientRequest(trace=3, start_ms=15_000.0, steps=[Call(attempts=(429, 200)), Tool(), Call()])
    assert "provider_throttling" not in by_cause(diagnose(build_all([*served, refused])))


def test_calls_served_first_time_are_fine() -> None:
    assert "provider_throttling" not in by_cause(diagnose(repeat(3, [Call(), Tool(), Call()])))
