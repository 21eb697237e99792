"""``run_stack`` end to end through the official OTLP exporters, over HTTP and gRPC; ``hotspan stack run``
with the services as separate processes."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from fastapi import FastAPI, Request, Response
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from hotspan.cli import main as hotspan_main
from instrumented_stack.runner import run_stack

SERVICES = {"gateway", "agent", "retriever", "tools", "vllm"}


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
    assert services >= {"gateway", "agent", "vllm"} and services <= SERVICES
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
    assert str(summary).startswith("3 requests, 0 errors, ")
    assert "e2e p50 " in str(summary) and "TTFT p50 " in str(summary)
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


def test_stack_run_cli_replays_a_workload_with_faults_in_separate_processes(
    serve: Callable[[FastAPI], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    received = Received()
    endpoint = serve(_http_receiver(received))
    manifest_path = tmp_path / "run.json"
    argv = ["stack", "run", "--workload", "azure-code", "--limit", "4", "--closed-loop", "2", "--speed", "100"]
    argv += ["--faults", "connection_per_request,prefix_cache_off", "--endpoint", endpoint]
    argv += ["--manifest", str(manifest_path), "--no-progress", "--seed", "7", "--engine", "emulator"]
    argv += ["--lookup-latency", "0.05"]
    assert hotspan_main(argv) == 0
    assert "4 requests, 0 errors" in capsys.readouterr().out
    assert {service for service, _ in received.spans} == SERVICES
    names = {name for _, name in received.spans}
    assert {"tls_handshake", "connect", "llm_request"} <= names
    manifest = json.loads(manifest_path.read_text())
    assert (manifest["seed"], manifest["workload"]) == (7, "azure-code")
    assert manifest["faults"] == ["connection_per_request", "prefix_cache_off"]
    assert manifest["loop"] == {"mode": "closed", "users": 2}
    assert manifest["process_mode"] == "processes"
    assert manifest["engine"] == "emulator"
    assert manifest["stack_config"]["tools"]["lookup_latency_s"] == 0.05
    assert manifest["services"]["engine"].startswith("https://")
    window = manifest["window"]
    assert 0 < window["start_unix_ns"] < window["end_unix_ns"]
    assert len(manifest["trace_ids"]) == 4
    assert not any("connection_per_request" in name or "prefix_cache_off" in name for name in names)


def test_stack_run_cli_refuses_unknown_faults(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["stack", "run", "--workload", "mooncake", "--faults", "gremlins", "--endpoint", "http://127.0.0.1:9"]
    assert hotspan_main(argv) == 2
    assert "unknown fault" in capsys.readouterr().err


def test_stack_run_cli_refuses_a_negative_lookup_latency(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["stack", "run", "--workload", "azure-conv", "--lookup-latency", "-1", "--endpoint", "http://127.0.0.1:9"]
    assert hotspan_main(argv) == 2
    assert "lookup_latency_s" in capsys.readouterr().err


def test_stack_run_cli_fails_fast_when_the_endpoint_is_down(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["stack", "run", "--workload", "azure-conv", "--limit", "2", "--engine", "emulator"]
    argv += ["--no-progress", "--endpoint", "http://127.0.0.1:9"]
    assert hotspan_main(argv) == 2
    assert "OTLP endpoint http://127.0.0.1:9 (http/protobuf) does not accept exports" in capsys.readouterr().err
