"""Real Prometheus, Alertmanager and a webhook receiver on loopback for the alerting tests, plus span builders.

The binaries come from Debian (``apt-get install -y prometheus prometheus-alertmanager``; ``make test``
installs them). A missing binary fails the test with that hint: nothing here skips.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
import yaml

from storage.schema import SPAN_SCHEMA

DEBIAN_PACKAGES = {
    "prometheus": "prometheus",
    "promtool": "prometheus",
    "prometheus-alertmanager": "prometheus-alertmanager",
}


def binary(name: str) -> str:
    """Path of a Debian-packaged binary; fails the test with an install hint when it is missing."""
    found = shutil.which(name) or (shutil.which("alertmanager") if name == "prometheus-alertmanager" else None)
    if found is None:
        package = DEBIAN_PACKAGES[name]
        pytest.fail(f"{name} is missing: install Debian's {package} (apt-get install -y {package}); make test does")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.25) -> Any:
    """Call ``check`` until it returns something truthy; fail after ``timeout_s`` naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)


@contextmanager
def _process(command: list[str], ready_url: str, log: Path) -> Iterator[None]:
    """Run ``command`` until the block ends; wait for ``ready_url`` to answer 200 first."""
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:

        def ready() -> bool:
            if process.poll() is not None:
                pytest.fail(f"{command[0]} exited with {process.returncode}: {log.read_text()[-2000:]}")
            try:
                return httpx.get(ready_url, timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, 30, f"{command[0]} to be ready")
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@contextmanager
def serving(name: str, workdir: Path, config: dict[str, Any], flags: list[str]) -> Iterator[str]:
    """The Debian binary ``name`` on a free loopback port with ``config`` (written as ``<name>.yml`` in
    ``workdir``) and ``flags`` (``{workdir}`` stands for ``workdir``), until the block ends; yields its base URL
    once ``/-/ready`` answers."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / f"{name}.yml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    command = [
        binary(name),
        f"--config.file={config_path}",
        *(flag.format(workdir=workdir) for flag in flags),
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    url = f"http://127.0.0.1:{port}"
    with _process(command, f"{url}/-/ready", workdir / f"{name}.log"):
        yield url


@contextmanager
def running_prometheus(
    workdir: Path, targets: list[str], rule_files: list[Path] = (), flags: Sequence[str] = ()
) -> Iterator[str]:
    """Prometheus scraping ``targets`` (``host:port``, path ``/metrics``) every second and evaluating
    ``rule_files`` every second, with extra command-line ``flags`` (``--enable-feature=exemplar-storage``);
    yields its base URL."""
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "900ms"},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [{"job_name": "hotspan", "static_configs": [{"targets": targets}]}],
    }
    with serving("prometheus", workdir, config, ["--storage.tsdb.path={workdir}/tsdb", *flags]) as url:
        yield url


@contextmanager
def running_alertmanager(workdir: Path, webhook_url: str) -> Iterator[str]:
    """Alertmanager routing everything to ``webhook_url`` within a second (resolved notifications on);
    yields its base URL."""
    config = {
        "route": {
            "receiver": "test",
            "group_by": ["alertname", "slo"],
            "group_wait": "1s",
            "group_interval": "1s",
            "repeat_interval": "1h",
        },
        "receivers": [{"name": "test", "webhook_configs": [{"url": webhook_url, "send_resolved": True}]}],
    }
    flags = ["--storage.path={workdir}/am-data", "--cluster.listen-address="]
    with serving("prometheus-alertmanager", workdir, config, flags) as url:
        yield url


class WebhookReceiver:
    """An HTTP server on loopback that keeps every JSON body POSTed to it (``payloads``, in arrival order)."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []
        received = self.payloads

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def with_status(self, status: str) -> list[dict[str, Any]]:
        return [payload for payload in self.payloads if payload.get("status") == status]


def server_spans(
    service: str,
    operation: str,
    durations_ms: list[float],
    *,
    start_ns: int,
    error: bool = False,
    seed: int = 0,
) -> pa.Table:
    """One root SERVER span per duration, each its own trace, starting at ``start_ns`` (a batch with
    :data:`storage.schema.SPAN_SCHEMA`)."""
    n = len(durations_ms)
    trace_ids = [f"{seed:08x}{i:024x}" for i in range(n)]
    empty_maps = [[] for _ in range(n)]
    columns: dict[str, Any] = {
        "Timestamp": pa.array([start_ns + i * 1000 for i in range(n)], pa.timestamp("ns")),
        "TraceId": trace_ids,
        "SpanId": [f"{seed:04x}{i:012x}" for i in range(n)],
        "ParentSpanId": [""] * n,
        "TraceState": [""] * n,
        "SpanName": [operation] * n,
        "SpanKind": ["Server"] * n,
        "ServiceName": [service] * n,
        "ResourceAttributes": pa.array([[("service.name", service)]] * n, SPAN_SCHEMA.field("ResourceAttributes").type),
        "ScopeName": [""] * n,
        "ScopeVersion": [""] * n,
        "SpanAttributes": pa.array(empty_maps, SPAN_SCHEMA.field("SpanAttributes").type),
        "Duration": pa.array([round(ms * 1_000_000) for ms in durations_ms], pa.uint64()),
        "StatusCode": ["Error" if error else "Unset"] * n,
        "StatusMessage": [""] * n,
        "Events.Timestamp": pa.array(empty_maps, SPAN_SCHEMA.field("Events.Timestamp").type),
        "Events.Name": pa.array(empty_maps, SPAN_SCHEMA.field("Events.Name").type),
        "Events.Attributes": pa.array(empty_maps, SPAN_SCHEMA.field("Events.Attributes").type),
        "Links.TraceId": pa.array(empty_maps, SPAN_SCHEMA.field("Links.TraceId").type),
        "Links.SpanId": pa.array(empty_maps, SPAN_SCHEMA.field("Links.SpanId").type),
        "Links.TraceState": pa.array(empty_maps, SPAN_SCHEMA.field("Links.TraceState").type),
        "Links.Attributes": pa.array(empty_maps, SPAN_SCHEMA.field("Links.Attributes").type),
    }
    return pa.table(columns, schema=SPAN_SCHEMA)


@contextmanager
def serving_metrics(exposition: Callable[[], bytes]) -> Iterator[str]:
    """An HTTP server on loopback answering ``GET /metrics`` with ``exposition()``; yields ``host:port``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = exposition()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
