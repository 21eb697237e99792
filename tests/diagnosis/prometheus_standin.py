"""A stand-in for Prometheus in tests: a real HTTP server on loopback speaking the Prometheus HTTP API's
``/api/v1/query_range`` for plain series selectors, over samples it holds or scrapes from a ``/metrics`` page.

Why a stand-in: Prometheus is a Go binary outside the Python dependencies, so a test that needs one cannot
run everywhere. Diagnosis sends only plain selectors (``vllm:num_requests_waiting``), which this server
evaluates like Prometheus does: for each step of ``[start, end]``, the newest sample at or before the step
within the 5-minute lookback; one series per label set; the answer shaped as Prometheus shapes it
(``{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {...}, "values": [[t,
"v"], ...]}]}}``). Anything else gets Prometheus's error envelope (HTTP 400, ``bad_data``).
``test_diagnosis_metrics`` checks it against a real Prometheus where one is installed.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

import httpx
from prometheus_client.parser import text_string_to_metric_families

LOOKBACK_S = 300.0
SCRAPER = "prometheus-standin-scrape"
CPU_PRESSURE = Path("/proc/pressure/cpu")
"""Linux PSI for the CPU (kernel 4.20+); ``some total=`` counts µs during which some runnable task waited."""
CPU_WAITING = "node_pressure_cpu_waiting_seconds_total"
"""node_exporter's name for that total, in seconds."""
SELECTOR = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")

Labels = tuple[tuple[str, str], ...]


class PrometheusStandIn:
    """Serve samples over the query_range API on ``127.0.0.1`` while open (a context manager).

    ``add`` stores samples; ``scrape_every(url, interval_s)`` polls a ``/metrics`` page in a thread, as
    Prometheus would. Thread-safe.
    """

    def __init__(self) -> None:
        self._samples: dict[str, dict[Labels, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._stop_scraping = threading.Event()

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, name: str, labels: dict[str, str], samples: list[tuple[float, float]]) -> None:
        """Store ``(unix seconds, value)`` samples of one series."""
        with self._lock:
            self._samples[name][tuple(sorted(labels.items()))].extend(samples)

    def scrape(self, url: str) -> None:
        """Read a Prometheus text exposition once and store every sample at the current time."""
        now = time.time()
        text = httpx.get(url, timeout=5, verify=False).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.add(sample.name, dict(sample.labels), [(now, float(sample.value))])

    def scrape_every(self, url: str, interval_s: float) -> None:
        """Scrape ``url`` every ``interval_s`` seconds until scraping stops (errors are skipped, as a failed
        scrape is)."""

        def scrape() -> None:
            with contextlib.suppress(httpx.HTTPError):
                self.scrape(url)

        self._every(interval_s, scrape)

    def sample_cpu_pressure_every(self, interval_s: float, path: Path = CPU_PRESSURE) -> bool:
        """Record this host's CPU pressure every ``interval_s`` seconds until scraping stops, as node_exporter
        exports it: ``node_pressure_cpu_waiting_seconds_total{instance="localhost"}``, the ``some`` line's
        ``total`` (µs) of Linux PSI as seconds. Returns False, recording nothing, where the kernel has no PSI."""
        if not path.exists():
            return False

        def sample() -> None:
            some = next(line for line in path.read_text().splitlines() if line.startswith("some "))
            total_us = float(dict(field.split("=") for field in some.split()[1:])["total"])
            self.add(CPU_WAITING, {"instance": "localhost"}, [(time.time(), total_us / 1e6)])

        self._every(interval_s, sample)
        return True

    def _every(self, interval_s: float, action: Callable[[], None]) -> None:
        """Run ``action`` now and then every ``interval_s`` seconds, in a thread, until scraping stops."""

        def loop() -> None:
            while not (self._stop.is_set() or self._stop_scraping.is_set()):
                action()
                self._stop_scraping.wait(interval_s)

        thread = threading.Thread(target=loop, name=SCRAPER, daemon=True)
        self._threads.append(thread)
        thread.start()

    def stop_scraping(self) -> None:
        """Stop every scraping thread after one last scrape each; the samples stay served."""
        self._stop_scraping.set()
        for thread in self._threads:
            if thread.name == SCRAPER:
                thread.join(timeout=5)

    def __enter__(self) -> Self:
        thread = threading.Thread(target=self._server.serve_forever, name="prometheus-standin", daemon=True)
        self._threads.append(thread)
        thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    def query_range(self, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """Prometheus's ``result`` for a plain selector. Raises ``ValueError`` for anything else."""
        if not SELECTOR.match(query):
            raise ValueError(f"the stand-in evaluates plain series selectors only, got {query!r}")
        if step <= 0 or end < start:
            raise ValueError("end must not be before start, and step must be positive")
        steps = [start + i * step for i in range(math.floor((end - start) / step) + 1)]
        with self._lock:
            series = {labels: sorted(samples) for labels, samples in self._samples.get(query, {}).items()}
        result = []
        for labels, samples in series.items():
            values = []
            for at in steps:
                before = [value for t, value in samples if at - LOOKBACK_S < t <= at]
                if before:
                    values.append([at, _text(before[-1])])
            if values:
                result.append({"metric": {"__name__": query, **dict(labels)}, "values": values})
        return result

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                params = {key: values[-1] for key, values in parse_qs(url.query).items()}
                if url.path != "/api/v1/query_range":
                    self._answer(404, {"status": "error", "errorType": "not_found", "error": url.path})
                    return
                try:
                    result = standin.query_range(
                        params["query"], float(params["start"]), float(params["end"]), _seconds(params["step"])
                    )
                except (KeyError, ValueError) as error:
                    self._answer(400, {"status": "error", "errorType": "bad_data", "error": str(error)})
                    return
                self._answer(200, {"status": "success", "data": {"resultType": "matrix", "result": result}})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler


def _seconds(step: str) -> float:
    """A Prometheus step: float seconds, or a duration such as ``1s``, ``500ms``, ``2m``."""
    match = re.fullmatch(r"([0-9.]+)(ms|s|m|h)?", step)
    if not match:
        raise ValueError(f"bad step {step!r}")
    value, unit = float(match.group(1)), match.group(2) or "s"
    return value * {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}[unit]


def _text(value: float) -> str:
    # Prometheus writes sample values as strings: integers without a decimal point, NaN as "NaN".
    value = float(value)
    if math.isnan(value):
        return "NaN"
    return str(int(value)) if value.is_integer() else repr(value)
