"""Back-pressure: official OTLP exporters are throttled (429 / UNAVAILABLE with a retry hint), retry, and
every span ends up stored exactly once; a server hammered with ten times the traffic it stores keeps
its memory bounded."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from served import serve

from hotspan.server import RunningServer, start_server
from hotspan.settings import load_settings

BATCHES_PER_EXPORTER = 4
SPANS_PER_BATCH = 250


@pytest.fixture
def throttling_server(chdb_dsn: str, tmp_path: Path) -> Iterator[RunningServer]:
    """A served Hotspan whose backlog limit (600 spans) is smaller than what the exporters send at once."""
    settings = load_settings(
        data_dir=tmp_path,
        clickhouse_dsn=chdb_dsn,
        clickhouse_database=f"o_{uuid.uuid4().hex[:12]}",
        http_port=0,
        grpc_port=0,
        queue_max_spans=600,
        retry_after_s=0.3,
    )
    server = start_server(settings)
    yield server
    server.stop()


def _batches(count: int) -> list[list[ReadableSpan]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "overload"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("overload")
    for _ in range(count * SPANS_PER_BATCH):
        with tracer.start_as_current_span("op", attributes={"k": "v", "n": 1}):
            pass
    spans = list(memory.get_finished_spans())
    return [spans[i : i + SPANS_PER_BATCH] for i in range(0, len(spans), SPANS_PER_BATCH)]


def test_official_exporters_are_throttled_retry_and_store_every_span_once(throttling_server: RunningServer) -> None:
    server = throttling_server
    exporters = [HttpExporter(endpoint=f"{server.base_url}/v1/traces", timeout=120) for _ in range(3)]
    exporters += [GrpcExporter(endpoint=f"127.0.0.1:{server.grpc_port}", insecure=True, timeout=120) for _ in range(3)]
    batches = _batches(len(exporters) * BATCHES_PER_EXPORTER)

    def run(index: int) -> list[SpanExportResult]:
        own = batches[index * BATCHES_PER_EXPORTER : (index + 1) * BATCHES_PER_EXPORTER]
        return [exporters[index].export(batch) for batch in own]

    with ThreadPoolExecutor(len(exporters)) as pool:
        results = [r for rs in pool.map(run, range(len(exporters))) for r in rs]

    assert results == [SpanExportResult.SUCCESS] * len(batches)
    assert server.pipeline.flush(60)
    rows, distinct = server.storage.clickhouse.query_rows(
        "SELECT count(), uniqExact(TraceId, SpanId) FROM otel_traces"
    )[0]
    assert rows == distinct == len(batches) * SPANS_PER_BATCH
    metrics = httpx.get(f"{server.base_url}/metrics").text
    for protocol in ("http/protobuf", "grpc"):
        throttled = f'hotspan_ingest_requests_total{{outcome="throttled",protocol="{protocol}"}}'
        assert any(line.startswith(throttled) and float(line.split()[-1]) > 0 for line in metrics.splitlines()), (
            protocol
        )


def _big_request(number: int) -> bytes:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    kv = resource_spans.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", "flood"
    scope_spans = resource_spans.scope_spans.add()
    for index in range(512):
        span = scope_spans.spans.add()
        span.trace_id = (number + 1).to_bytes(16, "big")
        span.span_id = (index + 1).to_bytes(8, "big")
        span.name = "op"
        span.start_time_unix_nano = 1_700_000_000_000_000_000 + index
        span.end_time_unix_nano = 1_700_000_000_000_000_000 + index + 10
        for key in range(20):
            attribute = span.attributes.add()
            attribute.key, attribute.value.string_value = f"attribute.{key}", "v" * 40
    return request.SerializeToString()


def test_memory_stays_under_1_gib_at_ten_times_the_stored_rate(tmp_path: Path) -> None:
    # Default limits but a 20000-span backlog, so the offered load soon meets 429s, small insert groups,
    # and a slow database (each insert waits 0.5 s: the storage fault hook), so the server stores less
    # than a tenth of what two dozen senders offer; without the delay it stores 15-20k spans/s on two
    # busy cores, as fast as the senders can offer.
    server = serve(tmp_path, queue_max_spans="20000", batch_max_spans="2500", fault_injection="insert_delay_s=0.5")
    url = f"{server.base_url}/v1/traces"
    bodies = [_big_request(number) for number in range(8)]
    outcomes: dict[int, int] = {}
    lock = threading.Lock()
    stop = threading.Event()
    peak = [server.rss_bytes()]

    def flood(offset: int) -> None:
        with httpx.Client(timeout=60) as client:
            number = offset
            while not stop.is_set():
                try:
                    status = client.post(
                        url, content=bodies[number % len(bodies)], headers={"content-type": "application/x-protobuf"}
                    ).status_code
                except httpx.HTTPError:
                    status = 0
                with lock:
                    outcomes[status] = outcomes.get(status, 0) + 1
                number += 1

    senders = [threading.Thread(target=flood, args=(i,)) for i in range(24)]
    try:
        for thread in senders:
            thread.start()
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            peak.append(server.rss_bytes())
            time.sleep(0.1)
        stop.set()
        for thread in senders:
            thread.join()
        inserted = server.metric("hotspan_storage_inserted_spans_total")
        healthy = httpx.get(f"{server.base_url}/healthz").status_code
    finally:
        stop.set()
        server.kill()
    offered = 512 * sum(outcomes.values())
    assert max(peak) < 1024**3, f"peak RSS {max(peak) / 1024**2:.0f} MiB"
    assert healthy == 200 and inserted > 0
    assert outcomes.get(429, 0) > 0, outcomes
    assert offered >= 10 * inserted, f"not a 10x overload: {offered} spans offered, {inserted} stored"
