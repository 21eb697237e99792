"""What ``hotspan demo`` runs beside the server so every page has something to show: the instrumented stack kept
running, a Prometheus scraping its engine when the binary is installed (Capacity, vLLM engine), and a minute with
one fault after the first run, so the anomaly detector opens an incident (Incidents) a few minutes in.

The detector (``incidents``) judges a whole minute ``HOTSPAN_ANOMALY_SETTLE_S`` (20 s) after it ends, evaluating
every ``HOTSPAN_ANOMALY_INTERVAL_S`` (15 s), once the minute holds ``HOTSPAN_ANOMALY_MIN_CALLS`` (20) requests. Two
ways open an incident: a series (an operation's p95 ...) leaving a robust baseline of at least five earlier minutes,
or a diagnosis finding at warning or worse that the diagnosis of the baseline window (the 30 minutes before, with
20 requests) did not have. The demo takes the second, at the detector's defaults: its first run (by :data:`USERS`
users, as the fault's minute) is the baseline window, and the next whole minute runs :data:`MINUTE_REQUESTS`
requests with :data:`FAULT` on, whose queueing the diagnosis names at ``critical``. So the
incident opens some 80-95 s after that minute starts: about two and a half minutes after the demo starts, where
waiting for five minutes of series baseline took eight and a half (issue 31). No latency series is judged in that
incident (its baseline is one minute); ``tests/diagnosis/test_anomaly_faults.py`` covers the series path.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import yaml

from instrumented_stack.faults import apply_faults
from instrumented_stack.runner import running_stack
from instrumented_stack.stack import StackConfig
from instrumented_stack.tools import ToolsConfig

MINUTE_REQUESTS = 30
"""Requests of the fault's minute: above the detector's least 20 a judged minute needs."""
USERS = 6
"""Users sending at once, in the first run and the fault's minute alike (the traffic keeps its shape, so the fault is
the one difference the detector sees), as in the fault matrix's runs (tests/diagnosis/test_diagnosis_faults.py): with
one user the engine never queues, and queue_saturation changes nothing."""
FAULT = "queue_saturation"
"""The fault of the minute after the first run: every LLM call waits in the engine's queue, which the diagnosis names
(``queue_saturation``, critical) where the first run's had no queueing (one incident, of the connected services)."""
TOOL_LATENCY_S = 0.1
"""The tools' lookup latency (s) of the fault matrix's runs, whose baselines the detector was tuned on."""
SCRAPE_INTERVAL_S = 2
"""Prometheus's scrape interval (s): a few scrapes within the demo's first seconds."""
READY_TIMEOUT_S = 30.0
"""How long Prometheus may take to start (s)."""


class DemoPrometheus:
    """A Prometheus on a free loopback port scraping the engines the demo adds (:meth:`add_target`), its data in a
    temporary directory removed on :meth:`close`. Targets come from a file it rereads every scrape interval
    (``file_sd_configs``): each stack the demo starts has its engine on a new port."""

    def __init__(self, binary: str) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="hotspan-demo-prometheus-"))
        self._targets_file = self._dir / "targets.json"
        self._targets: list[str] = []
        self._write_targets()
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        config = {
            "global": {"scrape_interval": f"{SCRAPE_INTERVAL_S}s", "scrape_timeout": f"{SCRAPE_INTERVAL_S - 1}s"},
            "scrape_configs": [
                {
                    "job_name": "vllm",
                    "file_sd_configs": [
                        {"files": [str(self._targets_file)], "refresh_interval": f"{SCRAPE_INTERVAL_S}s"}
                    ],
                }
            ],
        }
        config_file = self._dir / "prometheus.yml"
        config_file.write_text(yaml.safe_dump(config), encoding="utf-8")
        self._log = (self._dir / "prometheus.log").open("wb")
        self._process = subprocess.Popen(
            [
                binary,
                f"--config.file={config_file}",
                f"--storage.tsdb.path={self._dir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self) -> bool:
        """Whether it answers ``/-/ready`` within :data:`READY_TIMEOUT_S` (False: it exited or never did)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline and self._process.poll() is None:
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1.0).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        return False

    def add_target(self, engine_url: str) -> None:
        """Scrape ``engine_url``'s ``/metrics`` from the next refresh on."""
        self._targets.append(urlsplit(engine_url).netloc)
        self._write_targets()

    def _write_targets(self) -> None:
        # Written whole to a new file then renamed: Prometheus never reads half a file.
        partial = self._targets_file.with_suffix(".tmp")
        partial.write_text(json.dumps([{"targets": self._targets, "labels": {"job": "vllm"}}]), encoding="utf-8")
        partial.replace(self._targets_file)

    def close(self) -> None:
        """Stop it and remove its directory. Idempotent."""
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def _free_port() -> int:
    """A free loopback port for the child process to bind (released just before it starts: a small race, the one
    ``tests/prometheus_support.py`` takes too)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_prometheus() -> DemoPrometheus | None:
    """A ready :class:`DemoPrometheus` when a ``prometheus`` binary is on the PATH, else None (``make system-deps``
    installs Debian's)."""
    binary = shutil.which("prometheus")
    if binary is None:
        return None
    prometheus = DemoPrometheus(binary)
    if prometheus.wait_ready():
        return prometheus
    prometheus.close()
    return None


def demo_config() -> StackConfig:
    """The stack's configuration in the demo: the fault matrix's (tools' lookup latency)."""
    return StackConfig(tools=ToolsConfig(lookup_latency_s=TOOL_LATENCY_S))


def drive_demo(
    endpoint: str,
    requests: int,
    prometheus: DemoPrometheus | None,
    stop: threading.Event,
    say: Callable[[str], None],
) -> None:
    """Run the demo's traffic against the Hotspan at ``endpoint`` until ``stop`` is set: ``requests`` requests
    (the incident's baseline: at least ``HOTSPAN_ANOMALY_MIN_CALLS``) by :data:`USERS` users on a stack kept open (its
    engine scraped by ``prometheus`` when given), then :data:`MINUTE_REQUESTS` at the start of the next whole minute
    with :data:`FAULT` on (a second stack, since a fault is a configuration), then nothing more. Progress goes to
    ``say``. Blocks; run it in a thread."""
    config = demo_config()
    with running_stack(endpoint, config=config) as clean:
        if prometheus is not None:
            prometheus.add_target(clean.urls.engine)
        say(f"Stack run: {clean.replay(requests, concurrency=USERS)}")
        fault_at = _next_minute(time.time())
        say(
            f"Open {endpoint}/ui/ to explore the traces. At {_clock(fault_at)} a minute of traffic with a fault "
            f"({FAULT}) starts; the Incidents page shows the incident it opens by about {_clock(fault_at + 120)}. "
            "Ctrl-C stops."
        )
        if stop.wait(fault_at - time.time()):
            return
        with running_stack(endpoint, config=apply_faults(config, [FAULT])) as faulty:
            if prometheus is not None:
                prometheus.add_target(faulty.urls.engine)
            summary = faulty.replay(MINUTE_REQUESTS, offset=requests, concurrency=USERS)
        say(f"Fault {FAULT} run: {summary}; the Incidents page shows the incident within two minutes.")
        stop.wait()


def _next_minute(now: float) -> float:
    """A second past the next whole minute after ``now`` (s since the epoch): a minute's requests fall in it."""
    return now - now % 60 + 61


def _clock(at: float) -> str:
    """``at`` (s since the epoch) as the local time of day, HH:MM:SS."""
    return time.strftime("%H:%M:%S", time.localtime(at))
