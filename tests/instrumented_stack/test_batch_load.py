"""The batch client's schedule: a rate rising linearly to its cap, then steady; and its start, which can wait
for the gateway's first request (against a loopback stand-in for the gateway, its metrics included)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_support import wait_until

from instrumented_stack.batch_load import BatchLoad, BatchLoadConfig, send_offset_s
from instrumented_stack.loadgen import TenantCredentials


def test_the_rate_ramps_then_holds() -> None:
    config = BatchLoadConfig(rate_per_s_per_s=8.0, max_rate_per_s=40.0)
    # r(t) = 8 t: the 4th request is due when 4 t^2 = 4, at 1 s; the cap (40/s) comes at 5 s, after 100 requests.
    assert send_offset_s(config, 4) == pytest.approx(1.0)
    assert send_offset_s(config, 100) == pytest.approx(5.0)
    assert send_offset_s(config, 140) - send_offset_s(config, 100) == pytest.approx(1.0)
    offsets = [send_offset_s(config, n) for n in range(1, 200)]
    assert offsets == sorted(offsets)


class _GatewayStandIn(BaseHTTPRequestHandler):
    """The gateway's ``/metrics`` (``gateway_requests_total`` from the server's ``requests``) and its
    ``POST /v1/agent`` (counted in ``posts``)."""

    server: _StandInServer

    def do_GET(self) -> None:
        self.server.polls += 1
        count = f'gateway_requests_total{{tier="P0"}} {self.server.requests}\n'
        self._answer(f"# TYPE gateway_requests_total counter\n{count}".encode())

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.server.posts += 1
        self._answer(b"{}")

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _StandInServer(ThreadingHTTPServer):
    requests = 0
    polls = 0
    posts = 0


def test_the_job_waits_for_the_gateways_requests() -> None:
    server = _StandInServer(("127.0.0.1", 0), _GatewayStandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    config = BatchLoadConfig(after_requests=2, rate_per_s_per_s=1000.0, max_rate_per_s=1000.0, max_requests=3)
    batch = BatchLoad(config, url, TenantCredentials("tenant-b"))
    try:
        batch.start()
        # A gateway nobody has called yet, read again and again: nothing is sent.
        wait_until(lambda: server.polls >= 5, 10.0, "five reads of the gateway's /metrics", every_s=0.01)
        assert server.posts == 0
        server.requests = 1
        wait_until(lambda: server.polls >= 10, 10.0, "five more reads after its first request", every_s=0.01)
        assert server.posts == 0
        server.requests = 2
        wait_until(lambda: server.posts == 3, 10.0, "the job's three requests", every_s=0.01)
    finally:
        batch.stop()
        server.shutdown()
        server.server_close()
