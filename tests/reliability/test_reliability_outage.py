"""A storage outage under load loses no acknowledged span and stores none twice (a real server subprocess).

Storage fails at the client boundary (the ``HOTSPAN_FAULT_INJECTION`` test hook, ``storage.faults``): every insert
into ``otel_traces`` raises what clickhouse-connect raises for ``TOO_MANY_PARTS``, for 5 s in the CI form and 60 s
in the long one, while eight senders keep sending and retry as OTLP exporters do.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flood import batch, flood
from scale import sized
from served import serve, stored_by_trace

SPANS = 100


def test_acknowledged_spans_survive_a_storage_outage_under_load(tmp_path: Path, figure: Callable[..., None]) -> None:
    outage_s = sized(5, 60)
    server = serve(tmp_path, fault_injection=f"insert_fail_for_s={outage_s},start_after_s=1")
    try:
        answers = flood(f"{server.base_url}/v1/traces", batch(SPANS), senders=8, seconds=outage_s + 4, backoff=True)
        server.wait_drained(300)
        failures = server.metric("hotspan_storage_insert_failures_total")
    finally:
        server.stop()
    stored = stored_by_trace(tmp_path)
    acknowledged = {f"{number + 1:032x}" for number in answers.acknowledged}
    kept = sum(rows for trace, (rows, _) in stored.items() if trace in acknowledged)

    figure(f"acknowledged spans stored after a {outage_s} s outage", f"{kept} of {len(acknowledged) * SPANS}", "all")
    figure("answers during the outage", dict(answers.statuses), "200, 429 or 503 only")
    assert failures > 0, "the outage did not happen"
    assert set(answers.statuses) <= {200, 429, 503}
    assert acknowledged <= set(stored), f"{len(acknowledged - set(stored))} acknowledged requests lost"
    assert all(rows == distinct == SPANS for rows, distinct in stored.values()), "a span was stored twice"
