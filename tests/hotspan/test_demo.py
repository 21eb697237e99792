"""The demo's Prometheus (``hotspan.demo``): Debian's binary started on a free port, scraping the engines the demo
adds while it runs, gone with its directory once closed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread

import httpx
import pytest

from diagnosis.metrics import DEFAULT_PROMETHEUS_TIMEOUT_S
from hotspan.demo import DemoPrometheus, start_prometheus
from storage.prometheus import PrometheusReader

QUERY = "vllm:num_requests_waiting"
"""The gauge the stand-in engine serves."""
SCRAPED_TIMEOUT_S = 30.0
"""How long the first scrape of a new target may take (file refresh plus a scrape interval, on a loaded host)."""


class Metrics(BaseHTTPRequestHandler):
    """An engine's ``/metrics``: one gauge."""

    def do_GET(self) -> None:
        body = b"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 3\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        return


@pytest.fixture
def engine() -> Iterator[str]:
    """Base URL of a loopback server answering ``/metrics``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_demo_prometheus_scrapes_each_engine_added_while_it_runs(engine: str) -> None:
    prometheus = start_prometheus()
    assert isinstance(prometheus, DemoPrometheus), "make system-deps installs Debian's prometheus"
    try:
        prometheus.add_target(engine)
        deadline = time.monotonic() + SCRAPED_TIMEOUT_S
        while True:
            answer = httpx.get(f"{prometheus.url}/api/v1/query", params={"query": QUERY})
            found = answer.json()["data"]["result"]
            if found:
                break
            assert time.monotonic() < deadline, "the added engine was not scraped"
            time.sleep(0.5)
        assert found[0]["value"][1] == "3" and found[0]["metric"]["job"] == "vllm"
        # A range read at a step of a fraction of a second more than whole (what a short window's step is): Prometheus
        # refused "3.6s", so the demo's diagnosis read no engine metrics.
        scraped = float(found[0]["value"][0])
        reader = PrometheusReader(prometheus.url, DEFAULT_PROMETHEUS_TIMEOUT_S)
        series = reader.range_queries({"waiting": QUERY}, scraped, scraped + 10, 3.6)["waiting"]
        assert series and series[0]["values"]
    finally:
        prometheus.close()
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{prometheus.url}/-/ready", timeout=2)
