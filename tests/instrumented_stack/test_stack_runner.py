"""``run_stack`` end to end through the official OTLP exporters, over HTTP and gRPC."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent import futures

import grpc
import pytest
from fastapi import FastAPI, Request, Response
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from instrumented_stack.runner import run_stack


class Received:
    """Spans an OTLP receiver got, as (service.name, span name) pairs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans: list[tuple[str, str]] = []

    def add(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self._lock:
            for resource_spans in request.resource_spans:
                attributes = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    self.spans.extend((attributes["service.name"], span.name) for span in scope_spans.spans)


def _http_receiver(received: Received) -> FastAPI:
    app = FastAPI(title="otlp-http-receiver")

    @app.post("/v1/traces")
    async def traces(request: Request) -> Response:
        received.add(trace_service_pb2.ExportTraceServiceRequest.FromString(await request.body()))
        return Response(
            trace_service_pb2.ExportTraceServiceResponse().SerializeToString(),
            media_type="application/x-protobuf",
        )

    return app


class _GrpcTraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, received: Received) -> None:
        self._received = received

    def Export(  # the gRPC method's name
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self._received.add(request)
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.fixture
def grpc_receiver() -> Iterator[tuple[str, Received]]:
    received = Received()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_GrpcTraceService(received), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"http://127.0.0.1:{port}", received
    server.stop(None)


def _assert_full_stack(received: Received, requests: int) -> None:
    services = {service for service, _ in received.spans}
    assert services == {"gateway", "agent", "vllm"}
    assert received.spans.count(("vllm", "llm_request")) == requests
    assert received.spans.count(("gateway", "POST /v1/agent")) == requests


def test_run_stack_exports_over_otlp_http(serve: Callable[[FastAPI], str]) -> None:
    received = Received()
    endpoint = serve(_http_receiver(received))
    summary = run_stack(endpoint, requests=3, concurrency=2, speed=100, offset=10)
    assert (summary.requests, summary.errors) == (3, 0)
    assert [outcome.workload.index for outcome in summary.outcomes] == [10, 11, 12]
    assert summary.p50_e2e_ms is not None and summary.p95_e2e_ms is not None
    assert 0 < summary.p50_e2e_ms <= summary.p95_e2e_ms
    assert str(summary).startswith("3 requests, 0 errors, e2e p50 ")
    _assert_full_stack(received, 3)


def test_run_stack_exports_over_otlp_grpc(grpc_receiver: tuple[str, Received]) -> None:
    endpoint, received = grpc_receiver
    summary = run_stack(endpoint, requests=2, protocol="grpc", speed=100)
    assert (summary.requests, summary.errors) == (2, 0)
    _assert_full_stack(received, 2)


def test_run_stack_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="endpoint"):
        run_stack(None)
    with pytest.raises(ValueError, match="requests"):
        run_stack("http://127.0.0.1:4318", requests=0)
    with pytest.raises(ValueError, match="speed"):
        run_stack("http://127.0.0.1:4318", speed=0)
