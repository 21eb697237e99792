"""The stack's uvicorn servers (``instrumented_stack.serving``) under OpenTelemetry's ASGI instrumentation: a request
that arrives on a keep-alive connection while the previous one is in flight (pipelined, as a busy client's pooled
connection can) is a trace of its own, not a child of the request before it (uvicorn starts it from inside the
finishing request's task; ``reset_contextvars``)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from instrumented_stack.serving import ThreadedServer, bind_loopback
from instrumented_stack.telemetry import build_tracer_provider, instrument_fastapi_app

REQUESTS = 4


@pytest.fixture
def served() -> Iterator[tuple[ThreadedServer, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = build_tracer_provider("serving-test", SimpleSpanProcessor(exporter), hotspan_sdk=False)
    app = FastAPI()
    instrument_fastapi_app(app, provider)

    @app.get("/slow")
    async def slow() -> dict[str, bool]:
        # Holds the request in flight while the pipelined ones wait on the connection.
        await asyncio.sleep(0.05)
        return {"ok": True}

    server = ThreadedServer(app, bind_loopback(), name="serving-test")
    server.start()
    try:
        yield server, exporter
    finally:
        server.stop()
        provider.shutdown()


def test_pipelined_requests_on_one_connection_are_separate_traces(
    served: tuple[ThreadedServer, InMemorySpanExporter],
) -> None:
    server, exporter = served
    host, port = server.url.removeprefix("http://").split(":")
    request = f"GET /slow HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(request * REQUESTS)
        received = b""
        while received.count(b"HTTP/1.1 200") < REQUESTS or not received.endswith(b'{"ok":true}'):
            chunk = connection.recv(65536)
            assert chunk, f"connection closed after {received!r}"
            received += chunk
    deadline = time.monotonic() + 10
    # A span ends once its response is sent, just after the client can read it.
    while len(servers := [s for s in exporter.get_finished_spans() if s.name == "GET /slow"]) < REQUESTS:
        assert time.monotonic() < deadline, servers
        time.sleep(0.01)
    assert [span.kind for span in servers] == [SpanKind.SERVER] * REQUESTS
    assert all(span.parent is None for span in servers)
    assert len({span.context.trace_id for span in servers}) == REQUESTS
