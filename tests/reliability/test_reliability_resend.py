"""Re-sends and re-imports count every span once, in every read path (issue 17: 114 spans for a 57-span file
imported twice, 6 for a 3-span body posted twice, 700 rows for 600 spans after a sender's retries).

Each test reads the trace through every API family (``reads.trace_views``: /api/v1 trace and search, Jaeger v1
trace and search, Jaeger v3, RED, stages, hotspots, topology, dependencies) and counts the stored rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from reads import NS, SpanSpec, post, request, trace_views

from hotspan.importer import OtlpHttpSink, import_paths
from hotspan.server import RunningServer
from testkit import TRACES, serve_in_process

Figure = Callable[[str, object, str], None]


def three_spans(trace: int) -> bytes:
    """A 3-span trace over two services: a root server span, its client child, and the server span it calls."""
    return request(
        trace,
        [
            SpanSpec(1, name="GET /chat", duration_ns=100_000_000),
            SpanSpec(2, parent_id=1, name="call backend", kind=3, start_ns=10_000_000, duration_ns=50_000_000),
        ],
    ) + request(
        trace, [SpanSpec(3, parent_id=2, name="backend op", start_ns=12_000_000, duration_ns=40_000_000)], "backend"
    )


def test_the_same_body_posted_twice_is_three_spans_not_six(hotspan_server: RunningServer, figure: Figure) -> None:
    body = three_spans(0x5E5E)
    assert post(hotspan_server, body).status_code == 200
    once = trace_views(hotspan_server, 0x5E5E)
    assert post(hotspan_server, body).status_code == 200
    twice = trace_views(hotspan_server, 0x5E5E)

    figure("spans read after posting a 3-span body twice", twice["v1 spans"], "3")
    assert once["v1 spans"] == 3
    assert twice == once, "a read path counts the re-sent spans"
    assert twice["stored rows"] == 3
    assert twice["red calls"] == twice["hotspot spans"] == 3
    assert twice["topology calls"] == 2 and twice["dependencies"] == 1


def test_a_span_exported_again_more_complete_replaces_the_first(hotspan_server: RunningServer, figure: Figure) -> None:
    first = request(0x7A7A, [SpanSpec(1, name="GET /chat", duration_ns=20_000_000)])
    complete = request(
        0x7A7A, [SpanSpec(1, name="GET /chat", duration_ns=100_000_000, attributes={"http.route": "/chat"}, error=True)]
    )
    assert post(hotspan_server, first).status_code == 200
    assert post(hotspan_server, complete).status_code == 200
    views = trace_views(hotspan_server, 0x7A7A)
    span = httpx.get(f"{hotspan_server.base_url}/api/v1/traces/{0x7A7A:032x}").json()["spans"][0]

    figure("spans read after a span was exported twice, the second time complete", views["v1 spans"], "1")
    assert views["v1 spans"] == views["jaeger v1 spans"] == views["jaeger v3 spans"] == 1
    assert views["v1 search span_count"] == [1] and views["jaeger v1 search spans"] == [1]
    assert span["duration_ns"] == 100_000_000
    assert (span["attributes"], span["status_code"]) == ({"http.route": "/chat"}, "Error")
    assert views["stages total_ns"] == 100_000_000
    assert views["red calls"] == 1, "RED counts a span once, at its first copy"
    assert views["stored rows"] == 2, "both copies are kept; readers take the later one"


@pytest.fixture
def slow_storage_server(chdb_dsn: str, tmp_path: Path) -> Iterator[RunningServer]:
    """A served Hotspan whose every insert into ClickHouse waits 3 s (the storage fault hook): longer than an answer
    waits for its insert (2 s)."""
    server = serve_in_process(chdb_dsn, tmp_path, "r", fault_injection="insert_delay_s=3")
    yield server
    server.stop()


@pytest.mark.parametrize("client_timeout_s", [5.0, 1.0])
def test_a_sender_retrying_after_its_timeout_while_storage_is_slow_stores_each_span_once(
    slow_storage_server: RunningServer, figure: Figure, client_timeout_s: float
) -> None:
    """Six senders, 100 spans each, retrying until answered, while storage takes 3 s per insert (issue 17: with a
    5 s client timeout, 700 rows for 600 spans). An answer waits for its insert at most 2 s (the pipeline's
    ``insert_wait_s``), so a 5 s sender is answered in time; a 1 s sender still times out and sends again, and
    its copies are stored once."""
    server = slow_storage_server

    def send(sender: int) -> int:
        body = request(0xA000 + sender, [SpanSpec(i + 1, start_ns=i * 1000) for i in range(100)])
        attempts = 0
        while True:
            attempts += 1
            try:
                if post(server, body, timeout=client_timeout_s).status_code == 200:
                    return attempts
            except httpx.TimeoutException:
                continue

    with ThreadPoolExecutor(6) as pool:
        attempts = list(pool.map(send, range(6)))
    assert server.pipeline.flush(120)
    rows, spans = server.storage.clickhouse.query_rows("SELECT count(), uniqExact(TraceId, SpanId) FROM otel_traces")[0]
    read = sum(
        len(httpx.get(f"{server.base_url}/api/v1/traces/{0xA000 + sender:032x}").json()["spans"]) for sender in range(6)
    )

    goal = "6: answered before the timeout" if client_timeout_s >= 2 else "> 6: the senders retried"
    figure(f"sends of 6 requests with a {client_timeout_s:g} s client timeout", sum(attempts), goal)
    figure("rows stored / spans read for 600 spans", f"{rows} / {read}", "600 / 600")
    if client_timeout_s < 2:
        assert sum(attempts) > 6, "no sender timed out: the test did not exercise a retry"
    else:
        assert sum(attempts) == 6, "a sender with the exporters' timeout had to send again"
    assert rows == spans == read == 600


def test_files_imported_twice_count_every_span_once(hotspan_server: RunningServer, figure: Figure) -> None:
    files = [
        TRACES / "zipkin" / "zipkin__smartthings-oauth-authorization.json",
        TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl",
        TRACES / "jaeger" / "jaeger__domain_01.json",
    ]
    base = hotspan_server.base_url

    def per_trace() -> dict[str, int]:
        assert hotspan_server.pipeline.flush(60)
        traces = httpx.get(f"{base}/api/v1/traces", params={"start_ns": 0, "limit": 10_000}).json()["traces"]
        return {trace["trace_id"]: trace["span_count"] for trace in traces}

    first = import_paths(files, OtlpHttpSink(base), progress=False)
    once = per_trace()
    second = import_paths(files, OtlpHttpSink(base), progress=False)
    twice = per_trace()
    rows = hotspan_server.storage.clickhouse.query_rows("SELECT count() FROM otel_traces")[0][0]

    figure("spans read after importing 3 files twice", sum(twice.values()), f"{first.spans} (one import)")
    # The Zipkin file's 175 records are 172 spans: its five Kafka receive records merge into two.
    assert first.spans == second.spans == sum(once.values()) == 172 + 547 + 5
    assert twice == once
    assert rows == first.spans


def test_a_window_of_re_sent_spans_counts_each_once_in_the_rollups(
    hotspan_server: RunningServer, figure: Figure
) -> None:
    """Many traces, each sent twice in different batches (as a collector replaying its queue would): RED and the
    per-trace summaries count them once."""
    bodies = [request(0xB000 + t, [SpanSpec(i + 1, start_ns=t * NS + i) for i in range(20)]) for t in range(30)]
    for body in bodies:
        assert post(hotspan_server, body).status_code == 200
    for body in reversed(bodies):
        assert post(hotspan_server, body).status_code == 200
    views = trace_views(hotspan_server, 0xB000)
    requests = httpx.get(
        f"{hotspan_server.base_url}/api/v1/stages", params={"start_ns": 0, "group_by": "service"}
    ).json()

    figure("RED calls after 600 spans were each sent twice", views["red calls"], "600")
    assert views["red calls"] == 600
    assert sum(group["requests"] for group in requests["groups"]) == 30
