"""The README's "Instrument your service" example and policy table are fixtures, so the docs cannot drift.

The example runs verbatim in a fresh interpreter (it sets the global tracer provider), with the README's
YAML table in HOTSPAN_SAMPLING_POLICIES and its OTLP endpoint pointed at a loopback receiver here.
"""

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

import hotspan_sdk
from hotspan_sdk import BaggageSampler

README = Path(hotspan_sdk.__file__).with_name("README.md").read_text()
EXAMPLE_ENDPOINT = "http://127.0.0.1:4318/v1/traces"
REPO_ROOT = Path(hotspan_sdk.__file__).parents[2]


def fenced(language: str) -> str:
    (block,) = re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)
    return block


@pytest.fixture
def otlp_receiver() -> Iterator[tuple[str, list[ExportTraceServiceRequest]]]:
    received: list[ExportTraceServiceRequest] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(ExportTraceServiceRequest.FromString(body))
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", received
    server.shutdown()
    server.server_close()


def test_example_is_about_ten_lines() -> None:
    assert len([line for line in fenced("python").splitlines() if line.strip()]) <= 12


def test_policy_table_is_valid() -> None:
    config = BaggageSampler.from_config(fenced("yaml")).config
    assert [policy.label for policy in config.policies] == ["debug", "off", "staging"]
    assert config.default_ratio == 0.1


def test_example_runs_and_exports_flagged_spans(otlp_receiver: tuple[str, list[ExportTraceServiceRequest]]) -> None:
    url, received = otlp_receiver
    example = fenced("python")
    assert EXAMPLE_ENDPOINT in example
    script = (
        example.replace(EXAMPLE_ENDPOINT, url)
        + "\n"
        + "\n".join(
            [
                "from opentelemetry import baggage, context",
                "entries = baggage.set_baggage('tenant_id', 't1')",
                "context.attach(baggage.set_baggage('sample_policy', 'debug-high', entries))",
                "span = trace.get_tracer('readme').start_span('chat llama', start_time=10**18)",
                "span.end(end_time=10**18 + 3 * 10**9)",  # 3 s: over the 2000 ms rule
                "provider.shutdown()",
            ]
        )
    )
    environment = {
        **os.environ,
        "HOTSPAN_SAMPLING_POLICIES": fenced("yaml"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    completed = subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    spans = [
        span
        for request in received
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]
    (span,) = spans
    attributes = {kv.key: kv.value for kv in span.attributes}
    assert attributes["hotspan.hotspot"].bool_value is True
    assert attributes["hotspan.hotspot.reason"].string_value == "static"
    assert attributes["hotspan.sampling.policy"].string_value == "debug"
    assert attributes["tenant_id"].string_value == "t1"
    assert span.trace_state == "ot=th:0"
