"""connection_setup_per_request: a TCP connection and TLS handshake on (nearly) every LLM call."""

from __future__ import annotations

import diagnosis_cases as cases
import polars as pl
from diagnosis_support import by_cause, diagnose

from diagnosis.rules.connection_setup_per_request import pool_connections


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


def test_calls_all_in_flight_at_once_open_one_each_through_a_pool_too() -> None:
    # Ten calls that overlap (as the mooncake replay's 91 calls did under load): an ideal keep-alive pool opens ten
    # connections too, so ten connecting calls are no sign of a client per call.
    overlapping = cases.connections(10, count=10, every_ms=1.0)
    assert "connection_setup_per_request" not in by_cause(diagnose(overlapping))


def test_the_ideal_pool_opens_one_per_call_in_flight_and_one_after_each_idle_gap() -> None:
    seconds = 1_000_000_000
    # Three overlapping calls, then two one after another 1 s later, then one after a 10 s gap: 3 + 0 + 1.
    starts = pl.Series([0, 1, 2, 4 * seconds, 5 * seconds, 16 * seconds])
    ends = pl.Series([3 * seconds, 3 * seconds, 3 * seconds, 4 * seconds + 5, 5 * seconds + 5, 16 * seconds + 5])
    assert pool_connections(starts, ends, 5 * seconds) == 4
