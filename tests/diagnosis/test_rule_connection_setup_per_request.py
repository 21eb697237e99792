"""connection_setup_per_request: a TCP connection and TLS handshake on (nearly) every LLM call."""

from __future__ import annotations

import diagnosis_cases as cases
from diagnosis_support import by_cause, diagnose


def test_a_new_tls_connection_per_call() -> None:
    # Connect 3 ms then TLS 2 ms, back to back, both on the critical path of each ~61 ms request: 8 %, under the
    # 10 % critical share.
    finding = by_cause(diagnose(cases.connections(10, tls_ms=2.0)))["connection_setup_per_request"]
    assert finding.severity == "warning"
    evidence = finding.evidence
    assert evidence["connection_share"] == 1.0 and evidence["tls_share"] == 1.0
    assert evidence["peer_name"] == "127.0.0.1:9103" and evidence["caller_service_name"] == "agent"
    assert evidence["setup_ms_p50"] == 5.0 and evidence["tls_ms_p50"] == 2.0
    assert 0.07 < evidence["setup_share"] < 0.1
    assert "TLS" in finding.title


def test_slow_handshakes_make_it_critical() -> None:
    finding = by_cause(diagnose(cases.connections(10, tls_ms=60.0)))["connection_setup_per_request"]
    assert finding.severity == "critical" and finding.evidence["setup_share"] > 0.1


def test_a_pool_warming_up_is_not_per_request() -> None:
    # Three of ten calls open a connection (a pool filling up): 0.3 < 0.8.
    assert "connection_setup_per_request" not in by_cause(diagnose(cases.connections(3)))
    # Too few calls to tell a pool's first connections from per-request ones.
    assert "connection_setup_per_request" not in by_cause(diagnose(cases.connections(4, count=4)))
