"""Never a 200 followed by loss (issue 28, items 1-3): what the receiver acknowledges is stored, or set aside in a
file with a log line, and readable by every route afterwards.

Real parts only: in-process servers on the session's embedded ClickHouse, OTLP/HTTP on loopback; the one store-side
refusal no valid span triggers any more is caused by the ``refuse_span_name`` storage fault (``storage/faults.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.batch import EARLIEST_PLAUSIBLE_NS, MAX_TIME_NS
from hotspan.server import RunningServer
from testkit import serve_in_process

DAY_NS = 86_400 * 10**9
BASE_NS = 1_700_000_000 * 10**9
DEADLINE_S = 60.0


def request(spans: list[dict], service: str = "no-loss") -> dict:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}


def span(trace: str, index: int, start_ns: int, end_ns: int | None = None, name: str = "op", parent: int = 0) -> dict:
    fields = {
        "traceId": trace,
        "spanId": f"{index:016x}",
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + 1_000_000 if end_ns is None else end_ns),
    }
    return fields | ({"parentSpanId": f"{parent:016x}"} if parent else {})


def export(server: RunningServer, payload: dict) -> tuple[dict, float]:
    """POST ``payload`` as OTLP/JSON; the answer (asserted 200) and its latency in seconds."""
    started = time.monotonic()
    answer = httpx.post(f"{server.base_url}/v1/traces", json=payload, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json(), time.monotonic() - started


def stored_spans(server: RunningServer, trace: str) -> int:
    rows = server.storage.clickhouse.query_rows(
        "SELECT count() FROM otel_traces WHERE TraceId = {t:String}", {"t": trace}
    )
    return int(rows[0][0])


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = DEADLINE_S) -> float:
    """Poll ``condition`` until it holds; the seconds it took. Fails the test at the deadline."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            pytest.fail(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)
    return time.monotonic() - started


@pytest.fixture
def server(chdb_dsn: str, tmp_path: Path) -> Iterator[RunningServer]:
    running = serve_in_process(chdb_dsn, tmp_path, trace_idle_s=0.5)
    yield running
    running.stop()


@pytest.fixture
def refusing_server(chdb_dsn: str, tmp_path: Path) -> Iterator[RunningServer]:
    """A server whose store refuses every insert holding a span named ``poison`` (and nothing else)."""
    running = serve_in_process(chdb_dsn, tmp_path, fault_injection="refuse_span_name=poison")
    yield running
    running.stop()


REPLAYED_DAYS = 150
"""More days than one insert may touch (100 partitions by default), few enough to store quickly."""


def test_a_request_spanning_many_days_is_stored_and_analysed(
    server: RunningServer, figure: Callable[[str, object, str], None]
) -> None:
    """A buffer replayed after days offline: spans of one trace, each on its own day, in one request. The store
    refuses an insert touching more than 100 partitions (days); before, such a request was acknowledged and retried
    forever (500 days in the issue), and a good request grouped with it was never stored."""
    replayed, fresh = "ab" * 16, "cd" * 16
    spans = [span(replayed, 1, BASE_NS, BASE_NS + REPLAYED_DAYS * DAY_NS)]
    spans += [span(replayed, i + 2, BASE_NS + i * DAY_NS, parent=1) for i in range(REPLAYED_DAYS - 1)]
    answer, _ = export(server, request(spans))
    assert answer == {}
    export(server, request([span(fresh, 1, BASE_NS)]))
    took = wait_for(
        lambda: stored_spans(server, replayed) == REPLAYED_DAYS and stored_spans(server, fresh) == 1, "all stored"
    )
    figure("spans of a many-day request stored", f"{REPLAYED_DAYS} of {REPLAYED_DAYS} in {took:.1f} s", "lost 0")
    health = httpx.get(f"{server.base_url}/healthz").json()
    assert health["status"] == "ok", health
    view = httpx.get(f"{server.base_url}/api/v1/traces/{replayed}", timeout=30)
    assert view.status_code == 200 and len(view.json()["spans"]) == REPLAYED_DAYS
    summary = "SELECT max(AnalysedSpans) FROM hotspan_trace_summary FINAL WHERE TraceId = {t:String}"
    wait_for(lambda: server.storage.clickhouse.query_rows(summary, {"t": replayed})[0][0] == REPLAYED_DAYS, "analysed")
    analysed = "SELECT count() FROM hotspan_span_analysis FINAL WHERE TraceId = {t:String}"
    assert server.storage.clickhouse.query_rows(analysed, {"t": replayed})[0][0] == REPLAYED_DAYS


@pytest.mark.parametrize("end_ns", [2**64 - 1, MAX_TIME_NS + 1])
def test_an_end_past_the_store_range_is_refused_with_its_reason(server: RunningServer, end_ns: int) -> None:
    """``endTimeUnixNano`` = 2^64-1 was accepted: search showed a 20 ns duration, five analysis routes answered
    500. Now the span is refused in ``partialSuccess`` and its batch-mate stored."""
    trace = "ef" * 16
    answer, _ = export(server, request([span(trace, 1, BASE_NS, end_ns), span(trace, 2, BASE_NS)]))
    assert int(answer["partialSuccess"]["rejectedSpans"]) == 1
    assert f"endTimeUnixNano {end_ns} is beyond the year 2262" in answer["partialSuccess"]["errorMessage"]
    wait_for(lambda: stored_spans(server, trace) == 1, "the valid span stored")


@pytest.mark.parametrize(
    ("start_ns", "end_ns"),
    [(1, MAX_TIME_NS), (MAX_TIME_NS - 1000, MAX_TIME_NS), (1, 1), (BASE_NS, MAX_TIME_NS)],
    ids=["epoch-to-2262", "last-instant", "epoch-instant", "never-ending"],
)
def test_times_at_the_validator_edges_are_readable_by_every_route(
    server: RunningServer, start_ns: int, end_ns: int
) -> None:
    """Accepted implies readable: a root and a child at the edges of the accepted time range, stored, then read by
    the trace, its analysis routes and search without a 5xx, with the duration as sent."""
    trace = f"{start_ns % 2**64:016x}{end_ns % 2**64:016x}"
    answer, _ = export(server, request([span(trace, 1, start_ns, end_ns), span(trace, 2, start_ns, end_ns, parent=1)]))
    if start_ns < EARLIEST_PLAUSIBLE_NS:
        # Valid, stored as sent, and the sender is told its times look like the wrong unit (nothing rejected).
        assert list(answer["partialSuccess"]) == ["errorMessage"]
        assert answer["partialSuccess"]["errorMessage"].startswith("2 spans start before 2000-01-01")
    else:
        assert answer == {}
    wait_for(lambda: stored_spans(server, trace) == 2, "both stored")
    base = f"{server.base_url}/api/v1/traces/{trace}"
    found = httpx.get(base, timeout=30)
    assert found.status_code == 200, found.text
    durations = {s["span_id"]: s["duration_ns"] for s in found.json()["spans"]}
    assert durations == {f"{1:016x}": end_ns - start_ns, f"{2:016x}": end_ns - start_ns}
    for route in ("/stages", "/critical-path", "/flamegraph", "/statistics", "/view"):
        answer = httpx.get(base + route, timeout=30)
        assert answer.status_code < 500, (route, answer.status_code, answer.text[:300])
    searched = httpx.get(f"{server.base_url}/api/v1/traces", params={"service": "no-loss"}, timeout=30)
    assert searched.status_code == 200, searched.text


def test_a_span_the_store_refuses_is_set_aside_and_the_rest_stored(
    refusing_server: RunningServer, figure: Callable[[str, object, str], None]
) -> None:
    """A span that passes every check and that the store refuses all the same (a poison span) once blocked its whole
    insert group forever. Now the group is stored in halves down to that span, which goes to the dead-letter
    directory (an importable OTLP file, its reason beside it, a metric, a log line); nothing else is lost."""
    server = refusing_server
    mixed, later = "12" * 16, "34" * 16
    spans = [span(mixed, i + 1, BASE_NS + i, name="poison" if i == 17 else "op") for i in range(40)]
    export(server, request(spans))
    export(server, request([span(later, 1, BASE_NS)]))
    took = wait_for(lambda: stored_spans(server, mixed) == 39 and stored_spans(server, later) == 1, "the rest stored")
    dead = server.pipeline.dead_letters
    wait_for(lambda: dead.spans == 1, "the poison span set aside")
    files = sorted(dead.directory.glob("*.otlp.pb"))
    assert len(files) == 1
    kept = ExportTraceServiceRequest.FromString(files[0].read_bytes())
    (only,) = [s for r in kept.resource_spans for sc in r.scope_spans for s in sc.spans]
    assert (only.name, only.span_id.hex(), kept.resource_spans[0].resource.attributes[0].value.string_value) == (
        "poison",
        f"{18:016x}",
        "no-loss",
    )
    assert "injected refusal" in files[0].with_name(files[0].name.replace(".otlp.pb", ".reason.txt")).read_text()
    metrics = httpx.get(f"{server.base_url}/metrics").text
    assert "hotspan_ingest_dead_letter_spans 1.0" in metrics
    health = httpx.get(f"{server.base_url}/healthz").json()
    assert health["status"] == "ok" and health["dead_letter_spans"] == 1, health
    figure("poison span isolated", f"39 of 40 stored, 1 set aside, in {took:.1f} s", "lost 0")


def test_a_poison_request_alone_never_holds_back_later_ones(
    refusing_server: RunningServer, figure: Callable[[str, object, str], None]
) -> None:
    """A poison span alone in its group: the store takes the next group, which proves the refusal is the span's, and
    the span is then set aside; the later requests are answered and stored within seconds, not retried behind it."""
    server = refusing_server
    export(server, request([span("56" * 16, 1, BASE_NS, name="poison")]))
    latencies, waits = [], []
    for index in range(5):
        trace = f"{index + 1:02x}" * 16
        _, latency = export(server, request([span(trace, 1, BASE_NS)]))
        latencies.append(latency)
        waits.append(wait_for(lambda trace=trace: stored_spans(server, trace) == 1, f"request {index} stored"))
    wait_for(lambda: server.pipeline.dead_letters.spans == 1, "the poison span set aside")
    assert stored_spans(server, "56" * 16) == 0
    figure("later requests: answer / stored within", f"{max(latencies):.2f} s / {max(waits):.2f} s", "seconds")
    assert max(waits) < 10, waits
