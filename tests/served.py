"""A Hotspan server in a subprocess (``python -m hotspan.cli serve``), for tests that kill it, measure its
memory, or restart it on the same data directory. The embedded ClickHouse allows one process per data
directory, so stored rows are counted by a short verifier subprocess once the server is gone."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout_s: float = 30) -> None:
    """Wait until something accepts connections on ``127.0.0.1:port``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on port {port}") from None
            time.sleep(0.05)


@dataclass
class ServedHotspan:
    process: subprocess.Popen[bytes]
    data_dir: Path
    http_port: int
    grpc_port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def rss_bytes(self) -> int:
        """Resident set size of the server process, bytes (Linux ``/proc``): private memory and the resident pages
        of mapped files (chiefly chDB's 530 MB library image) together."""
        return self._status_bytes("VmRSS")

    def private_bytes(self) -> int:
        """Resident anonymous memory of the server process, bytes (``RssAnon``: heaps, arenas, the engine's
        allocations): what load makes grow and what no one else can reclaim. A memory bound is held on this, not on
        :meth:`rss_bytes`, whose file-backed part depends on the host: how many of the library's pages one process
        maps follows the page cache's state (at idle, 276 MiB here with the library cached; CI's idle VmRSS was
        190 MiB above this host's with the same code and packages)."""
        return self._status_bytes("RssAnon")

    def _status_bytes(self, field: str) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no {field} in /proc/{self.process.pid}/status")

    def metric(self, name: str) -> float:
        """The value of an unlabelled metric on ``/metrics``."""
        for line in httpx.get(f"{self.base_url}/metrics", timeout=10).text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise KeyError(name)

    def wait_drained(self, timeout_s: float = 60) -> None:
        """Wait until the spool is empty (everything acknowledged is in ClickHouse)."""
        deadline = time.monotonic() + timeout_s
        while self.metric("hotspan_spool_segments") > 0:
            if time.monotonic() > deadline:
                raise TimeoutError("spool not drained")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        """SIGTERM and wait for a clean exit."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(60)


def serve(data_dir: Path, may_die: bool = False, log: Path | None = None, **env: str) -> ServedHotspan:
    """Start ``hotspan serve`` on free ports with ``HOTSPAN_*`` overrides from ``env``; wait until it
    answers (or, with ``may_die``, until it exits on its own). ``log``: a file for the server's output."""
    http_port, grpc_port = free_port(), free_port()
    environment = {**os.environ, **{f"HOTSPAN_{key.upper()}": value for key, value in env.items()}}
    command = [sys.executable, "-m", "hotspan.cli", "serve", "--data-dir", str(data_dir)]
    with open(log or os.devnull, "w") as output:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [*command, "--http-port", str(http_port), "--grpc-port", str(grpc_port)],
            cwd=REPO,
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=output,
        )
    served = ServedHotspan(process, data_dir, http_port, grpc_port)
    deadline = time.monotonic() + 90
    while True:
        if process.poll() is not None:
            if may_die:
                return served
            raise RuntimeError(f"hotspan serve exited with {process.returncode}")
        try:
            if httpx.get(f"{served.base_url}/healthz", timeout=2).status_code == 200:
                return served
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            served.kill()
            raise TimeoutError("hotspan serve did not come up")
        time.sleep(0.2)


_COUNT = """
import json, sys
from storage.clickhouse import ClickHouse
ch = ClickHouse("chdb://" + sys.argv[1], "otel")
rows = ch.query_rows("SELECT TraceId, count(), uniqExact(SpanId) FROM otel_traces GROUP BY TraceId")
print(json.dumps({trace: [int(n), int(distinct)] for trace, n, distinct in rows}))
"""


def stored_by_trace(data_dir: Path) -> dict[str, tuple[int, int]]:
    """``trace id → (rows, distinct span IDs)`` in the stopped server's ``otel_traces``."""
    output = subprocess.run(
        [sys.executable, "-c", _COUNT, str((data_dir / "clickhouse").resolve())],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout
    return {trace: (n, distinct) for trace, (n, distinct) in json.loads(output.splitlines()[-1]).items()}
