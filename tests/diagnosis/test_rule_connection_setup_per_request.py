"""connection_setup_per_request: a TCP connection and TLS handshake on (nearly) every LLM call."""

from __future__ import annotations

import diagnosis_cases as cases
from diagnosis_support import by_cause, diagnose


def test_a_new_tls_connection_per_call() -> None:
    finding = by_cause(diagnose(cases.connections(10)))["connection_setup_per_request"]
    assert finding.severity == "warning"  # 9 ms of 10 calls ~ 110 ms each: under the 10% critical share
    evidence = finding.evidence
    assert evidence["connection_share"] == 1.0 and evidence["tls_share"] == 1.0
    assert evidence["peer_name"] == "127.0.0.1:9103" and evidence["caller_service_name"] == "agent"
    assert evidence["setup_ms_p50"] == 9.0 and evidence["tls_ms_p50"] == 6.0
    assert "TLS" in finding.title


def test_slow_handshakes_make_it_critical() -> None:
    finding = by_cause(diagnose(cases.connections(10, tls_ms=60.0)))["connection_setup_per_request"]
    assert finding.severity == "critical" and finding.evidence["setup_share"] > 0.1


def test_a_pool_warming_up_is_not_per_request() -> None:
    # Three of ten calls open a connection (a pool filling up): 0.3 < 0.8.
    assert "connection_setup_per_request" not in by_cause(diagnose(cases.connections(3)))
    # Too few calls to tell a pool's first connections from per-request ones.
    assert "connection_setup_per_request" not in by_cause(diagnose(cases.connections(4, count=4)))
