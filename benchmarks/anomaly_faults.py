"""Issue 16's acceptance in real time: no incident on a steady clean run of the stack, one within two minutes of each
injected fault, naming it.

    .venv/bin/python benchmarks/anomaly_faults.py [--faults queue_saturation,retrieval_topk_blowup | all]
        [--clean-s 390] [--fault-s 150] [--recover-s 300] [--users 4] [--prometheus] [--keep DIR]

Starts ``hotspan serve`` (its own process and data directory, the anomaly loop every 5 s, minutes judged 15 s after
they end, traces analysed 2 s after they go quiet), then the instrumented stack in this process exporting over
OTLP/HTTP: six and a half clean minutes (the detector judges once five minutes of baseline exist), then each fault
switch in turn, its stack run for ``--fault-s`` while ``/api/v1/incidents`` is polled every 2 s, then clean again
for ``--recover-s`` while it is watched until the incident resolves. Each phase's stack starts :data:`OVERLAP_S`
before the previous one ends (no gap in traffic between them). The stack is the fault matrix's (Azure conversation
rows, engine speed 20, 100 ms catalogue lookups), replayed by ``--users`` closed-loop users; each phase sends the
next rows of the conversation trace (:class:`Rows`), so no prompt comes twice within a window. With ``--prometheus``
a real Prometheus (the Debian binary) scrapes the running stack's engine every second (its ``/metrics``, found through a
file_sd target file rewritten as each phase's stack starts) and the served Hotspan's diagnosis reads it
(``HOTSPAN_PROMETHEUS_URL``), as in a deployment with vLLM's metrics: faults only the engine's metrics show (prefix
caching switched off on a workload whose prompts share no prefix) can then be named.

Prints the incidents the clean run opened, then per fault: seconds from the fault's start to its incident's first
appearance in the API, the incident's primary series, the new causes it first listed, seconds from the fault's start
until its new findings named the fault's expected cause (``tests/diagnosis/test_diagnosis_faults.py``'s table; a
later window of the open incident can add it), and seconds of recovery until it resolved. Then
``anomaly_fault_detection_max_s: <slowest detection>``; the last line is ``anomaly_fault_named_max_s: <slowest
naming>`` (``inf`` when a fault opened no incident or it never named the fault).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from instrumented_stack.faults import FAULTS, apply_faults
from instrumented_stack.loadgen import UserSettings, replay_closed_loop
from instrumented_stack.prompts import PromptBuilder
from instrumented_stack.runner import with_speed
from instrumented_stack.stack import Stack, StackConfig
from instrumented_stack.telemetry import otlp_span_processors
from instrumented_stack.tokenizer import default_tokenizer
from instrumented_stack.tools import ToolsConfig
from instrumented_stack.workload import WorkloadRequest, load_workload

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, Python puts benchmarks/ first on sys.path; the repository root takes its place, so the packages
# (and the fault matrix's module below) are this checkout's.
if sys.path and Path(sys.path[0]).resolve() == ROOT / "benchmarks":
    sys.path[0] = str(ROOT)
# The fault matrix's stack parameters and answer key (fault switch -> the cause diagnosis names), kept in one place.
sys.path[1:1] = [str(ROOT / "tests" / "diagnosis"), str(ROOT / "tests")]
from prometheus_support import serving  # noqa: E402
from test_diagnosis_faults import EXPECTED_CAUSE, INTENTS, SPEED, TOOL_LATENCY_S  # noqa: E402

from query.incident_text import metric_value  # noqa: E402

OVERLAP_S = 15.0
"""Seconds each phase's stack serves beside the next one's, as a rolling deploy does: a gap between two stacks
(start-up, cold tokenizers, an empty prefix cache) would show as a throughput dip that opens an incident of its own
in the minute the fault starts."""
MAX_REQUESTS_PER_USER_S = 3.0
"""Requests a closed-loop user sends per second at most on this stack (measured on run 12: 4 users sent 393 and
424 requests in minutes of the clean phase, 1.7 per user-second, and 550 in a minute of a later clean phase): a
phase gets ``duration × users ×`` this many rows, so its users never run out of
prompts before its time is up (the loadgen stops a user with no prompt left, a throughput dip of its own).
Cycling a few hundred prompts instead makes the run itself change once the cycle comes round: every prompt then
repeats within a minute, and the repeats missed the prefix cache (by the arithmetic, the cycle's prompts outgrow
the engine's KV cache, and a cyclic working set larger than an LRU cache never hits), which
``prefix_cache_unused`` rightly reported as new."""
SERVER_ENV = {
    "HOTSPAN_ANOMALY_INTERVAL_S": "5",
    "HOTSPAN_ANOMALY_SETTLE_S": "15",
    "HOTSPAN_TRACE_IDLE_S": "2",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(data_dir: Path, prometheus_url: str | None) -> tuple[subprocess.Popen[bytes], str]:
    """``hotspan serve`` on a free port (reading engine metrics from ``prometheus_url`` when given); returns the
    process and its base URL once ``/healthz`` answers."""
    port = free_port()
    command = [sys.executable, "-m", "hotspan.cli", "serve", "--data-dir", str(data_dir)]
    command += ["--http-port", str(port), "--grpc-port=-1"]
    log = (data_dir / "serve.log").open("wb")
    env = os.environ | SERVER_ENV | ({"HOTSPAN_PROMETHEUS_URL": prometheus_url} if prometheus_url else {})
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.terminate()
    raise RuntimeError(f"hotspan serve did not answer on {url}; see {data_dir / 'serve.log'}")


@contextlib.contextmanager
def scraped_engines(workdir: Path) -> Iterator[tuple[str, Path]]:
    """A real Prometheus scraping, every second, the targets listed in a file_sd file; yields its URL and the file
    (write ``[{"targets": ["host:port"]}]`` to it, atomically, to point it at another engine)."""
    targets = workdir / "engines.json"
    targets.write_text("[]", encoding="utf-8")
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
        "scrape_configs": [{"job_name": "vllm", "file_sd_configs": [{"files": [str(targets)]}]}],
    }
    with serving("prometheus", workdir / "prometheus", config, ["--storage.tsdb.path={workdir}/tsdb"]) as url:
        yield url, targets


def point_at(targets: Path | None, engine_url: str) -> None:
    """Make the Prometheus of :func:`scraped_engines` scrape ``engine_url`` (nothing without one)."""
    if targets is None:
        return
    staged = targets.with_suffix(".tmp")
    staged.write_text(json.dumps([{"targets": [urlsplit(engine_url).netloc]}]), encoding="utf-8")
    staged.replace(targets)


class Load:
    """The stack with ``faults`` on, sending ``rows`` (in order) from ``users`` users in a background thread for
    :meth:`run_for`'s time; the Prometheus ``targets`` file (when given) pointed at its engine once it runs."""

    def __init__(
        self,
        url: str,
        faults: tuple[str, ...],
        users: int,
        rows: Sequence[WorkloadRequest],
        targets: Path | None = None,
    ) -> None:
        config = with_speed(
            apply_faults(StackConfig(tools=ToolsConfig(lookup_latency_s=TOOL_LATENCY_S)), faults), SPEED
        )
        builder = PromptBuilder(default_tokenizer(), 7, INTENTS)
        self._prompts = [builder.build(row) for row in rows]
        self._settings = UserSettings(tenants=config.credentials(("tenant-p0",)))
        self._stack = Stack(config, otlp_span_processors(url))
        self._users = users
        self._targets = targets
        self._duration_s = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def run_for(self, duration_s: float) -> None:
        """Start the load for ``duration_s`` seconds (returns at once)."""
        self._duration_s = duration_s
        self._thread.start()

    def join(self) -> None:
        self._thread.join()

    def _run(self) -> None:
        with self._stack as stack:
            point_at(self._targets, stack.urls.engine)
            asyncio.run(
                replay_closed_loop(
                    stack.gateway_url, self._prompts, self._settings, users=self._users, duration_s=self._duration_s
                )
            )


class Rows:
    """The conversation trace's rows handed out in consecutive blocks, round the whole trace: no prompt repeats
    until every row of the trace has been sent."""

    def __init__(self, rows: Sequence[WorkloadRequest]) -> None:
        self._rows = rows
        self._next = 0

    def take(self, duration_s: float, users: int) -> list[WorkloadRequest]:
        """Enough rows for ``users`` users over ``duration_s`` seconds (:data:`MAX_REQUESTS_PER_USER_S`)."""
        count = math.ceil(duration_s * users * MAX_REQUESTS_PER_USER_S)
        block = [self._rows[(self._next + offset) % len(self._rows)] for offset in range(count)]
        self._next += count
        return block


def incidents(url: str) -> list[dict[str, Any]]:
    return httpx.get(f"{url}/api/v1/incidents", params={"limit": 1000}, timeout=30).json()["incidents"]


def _change(incident: dict[str, Any]) -> str:
    """An incident's primary series change in words: ``x4.2``, or a finding's ``warning (baseline none)``."""
    observed, baseline = incident["observed_value"], incident["baseline_value"]
    if incident["metric"] == "severity":
        return f"{metric_value('severity', observed)} (baseline {metric_value('severity', baseline)})"
    return f"x{observed / max(baseline, 1e-9):.1f}"


def _first_new(url: str, seen: set[str], until: float) -> dict[str, Any] | None:
    """The newest incident not in ``seen``, polled every 2 s until ``until`` (epoch s); with ``seen_at``, when the
    poll first found it."""
    while True:
        fresh = [i for i in incidents(url) if i["incident_id"] not in seen]
        if fresh:
            return fresh[-1] | {"seen_at": time.time()}
        if time.time() >= until:
            return None
        time.sleep(2)


def _named_at(url: str, incident_id: str, cause: str, until: float) -> float | None:
    """When (epoch s) the incident ``incident_id`` first listed ``cause`` among its new findings, polled every 2 s
    until ``until``: a cause a later window finds is added to the open incident (``query.anomaly.merge_findings``).
    None when it did not by then."""
    while True:
        incident = next(i for i in incidents(url) if i["incident_id"] == incident_id)
        if any(f["new"] and f["cause"] == cause for f in incident["findings"]):
            return time.time()
        if time.time() >= until:
            return None
        time.sleep(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", default="queue_saturation,retrieval_topk_blowup")
    parser.add_argument("--clean-s", type=float, default=390.0)
    parser.add_argument("--fault-s", type=float, default=150.0)
    parser.add_argument("--recover-s", type=float, default=300.0)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--prometheus", action="store_true", help="diagnosis reads the engine's metrics too")
    parser.add_argument("--keep", type=Path, help="an empty directory to keep Hotspan's data in, to read afterwards")
    args = parser.parse_args()
    faults = list(FAULTS) if args.faults == "all" else [name for name in args.faults.split(",") if name]
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep}: not empty")
    data = (
        tempfile.TemporaryDirectory(prefix="hotspan-anomaly-")
        if args.keep is None
        else contextlib.nullcontext(args.keep)
    )
    with data as tmp, contextlib.ExitStack() as scope:
        Path(tmp).mkdir(parents=True, exist_ok=True)
        prometheus_url, targets = scope.enter_context(scraped_engines(Path(tmp))) if args.prometheus else (None, None)
        process, url = serve(Path(tmp), prometheus_url)
        try:
            rows = Rows(load_workload("azure-conv"))
            previous = Load(url, (), args.users, rows.take(args.clean_s, args.users), targets)
            previous.run_for(args.clean_s)
            time.sleep(args.clean_s - OVERLAP_S)
            clean = incidents(url)
            print(f"clean {args.clean_s:.0f} s: incidents opened {len(clean)}", flush=True)
            for incident in clean:
                print(f"  clean incident: {incident['service']} {incident['name']} {incident['metric']}", flush=True)
            slowest = slowest_named = 0.0
            for fault in faults:
                known = incidents(url)
                still_open = sum(1 for i in known if i["status"] == "open")
                seen = {incident["incident_id"] for incident in known}
                started = time.time()
                load = Load(url, (fault,), args.users, rows.take(args.fault_s, args.users), targets)
                load.run_for(args.fault_s)
                previous.join()
                # The clean stack takes over only when the fault's time is up, however soon its incident showed.
                switch_at = started + args.fault_s - OVERLAP_S
                found = _first_new(url, seen, switch_at)
                cause = EXPECTED_CAUSE[fault]
                named_at = None if found is None else _named_at(url, found["incident_id"], cause, switch_at)
                time.sleep(max(0.0, switch_at - time.time()))
                recovery_start = time.time()
                next_phase_at = recovery_start + args.recover_s - OVERLAP_S
                previous = Load(url, (), args.users, rows.take(args.recover_s, args.users), targets)
                previous.run_for(args.recover_s)
                load.join()
                found = found or _first_new(url, seen, started + args.fault_s + 30)
                if found is not None and named_at is None:
                    named_at = _named_at(url, found["incident_id"], cause, started + args.fault_s + 30)
                if found is None:
                    print(f"{fault}: no incident within {args.fault_s + 30:.0f} s ({still_open} open at its start)")
                    slowest = slowest_named = float("inf")
                    time.sleep(max(0.0, next_phase_at - time.time()))
                    continue
                detected_s = (found["seen_at"] or time.time()) - started
                slowest = max(slowest, detected_s)
                new = [f["cause"] for f in found["findings"] if f["new"]]
                named_s = float("inf") if named_at is None else max(named_at - started, detected_s)
                slowest_named = max(slowest_named, named_s)
                resolved_s = None
                while resolved_s is None and time.time() < next_phase_at:
                    now = {i["incident_id"]: i for i in incidents(url)}
                    if now[found["incident_id"]]["status"] == "resolved":
                        resolved_s = time.time() - recovery_start
                    else:
                        time.sleep(2)
                time.sleep(max(0.0, next_phase_at - time.time()))
                print(
                    f"{fault}: incident after {detected_s:.0f} s on {found['service']} {found['name']} "
                    f"{found['metric']} ({_change(found)}); "
                    f"new causes {new}; names {cause}: "
                    + (f"after {named_s:.0f} s; " if named_at is not None else "no; ")
                    + (f"resolved after {resolved_s:.0f} s" if resolved_s is not None else "not resolved")
                    + f" ({still_open} open at its start)",
                    flush=True,
                )
            previous.join()
        finally:
            process.terminate()
            process.wait(timeout=30)
    print(f"anomaly_fault_detection_max_s: {slowest:.0f}")
    print(f"anomaly_fault_named_max_s: {slowest_named:.0f}")


if __name__ == "__main__":
    main()
