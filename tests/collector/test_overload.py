"""Back-pressure: official OTLP exporters are throttled (429 / UNAVAILABLE with a retry hint), retry, and
every span ends up stored exactly once. (A server hammered with ten times the traffic it stores:
``tests/reliability/test_reliability_overload.py``.)"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hotspan.server import RunningServer, start_server
from hotspan.settings import load_settings

EXPORTERS = 6
BATCHES_PER_EXPORTER = 4
SPANS_PER_BATCH = 250
QUEUE_MAX_SPANS = EXPORTERS * BATCHES_PER_EXPORTER * SPANS_PER_BATCH


@pytest.fixture
def throttling_server(chdb_dsn: str, tmp_path: Path) -> Iterator[RunningServer]:
    """A served Hotspan whose backlog limit holds every span the exporters send, once it is free."""
    settings = load_settings(
        data_dir=tmp_path,
        clickhouse_dsn=chdb_dsn,
        clickhouse_database=f"o_{uuid.uuid4().hex[:12]}",
        http_port=0,
        grpc_port=0,
        queue_max_spans=QUEUE_MAX_SPANS,
        retry_after_s=1.0,
    )
    server = start_server(settings)
    yield server
    server.stop()


def _throttled(server: RunningServer, protocol: str) -> float:
    """Requests of ``protocol`` the server refused for lack of room so far (its ``/metrics``)."""
    series = f'hotspan_ingest_requests_total{{outcome="throttled",protocol="{protocol}"}}'
    lines = httpx.get(f"{server.base_url}/metrics").text.splitlines()
    return sum(float(line.split()[-1]) for line in lines if line.startswith(series))


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
    half = EXPORTERS // 2
    exporters = [HttpExporter(endpoint=f"{server.base_url}/v1/traces", timeout=120) for _ in range(half)]
    exporters += [
        GrpcExporter(endpoint=f"127.0.0.1:{server.grpc_port}", insecure=True, timeout=120) for _ in range(half)
    ]
    batches = _batches(len(exporters) * BATCHES_PER_EXPORTER)

    def run(index: int) -> list[SpanExportResult]:
        own = batches[index * BATCHES_PER_EXPORTER : (index + 1) * BATCHES_PER_EXPORTER]
        return [exporters[index].export(batch) for batch in own]

    # The whole backlog held, as by a store that cannot keep up: every sender's first try is refused with the hint.
    # Once each protocol has been refused it is released, and everything sent fits: no sender can be refused six
    # times (the official gRPC exporter's limit). With room for only some of the senders a refused one can lose
    # every race to those just answered (they send again the moment their insert frees the room, while it sleeps
    # through its hint): a CI run lost a gRPC exporter's batch so (stop 48).
    held = server.pipeline.admit("held", 0)
    server.pipeline.resize(held, 0, QUEUE_MAX_SPANS)
    try:
        with ThreadPoolExecutor(len(exporters)) as pool:
            sent = pool.map(run, range(len(exporters)))
            deadline = time.monotonic() + 60
            while not (_throttled(server, "http/protobuf") and _throttled(server, "grpc")):
                assert time.monotonic() < deadline, "no sender of each protocol was refused"
                time.sleep(0.05)
            server.pipeline.release(held)
            results = [r for rs in sent for r in rs]
    finally:
        server.pipeline.release(held)
        # Closed here: a gRPC channel left to interpreter shutdown can crash the process on its way out.
        for exporter in exporters:
            exporter.shutdown()

    assert results == [SpanExportResult.SUCCESS] * len(batches)
    assert server.pipeline.flush(60)
    rows, distinct = server.storage.clickhouse.query_rows(
        "SELECT count(), uniqExact(TraceId, SpanId) FROM otel_traces"
    )[0]
    assert rows == distinct == len(batches) * SPANS_PER_BATCH
