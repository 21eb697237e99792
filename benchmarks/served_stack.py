"""What ``diagnosis_matrix.py`` and ``false_alarms.py`` share: the instrumented stack run exactly as a user runs it,
against a served Hotspan, and the served diagnosis of each run's window.

A user runs ``hotspan serve`` (a fresh data directory; ``HOTSPAN_HTTP_PORT``/``HOTSPAN_GRPC_PORT`` set to free
ports), then ``hotspan stack run --workload W --duration D [--faults F] --endpoint http://127.0.0.1:<port>`` (the
stack's own defaults: open-loop replay, separate service processes, engine speed 20), then asks
``GET /api/v1/diagnosis?start_ns=&end_ns=`` over the run's window (the run manifest's ``window``). Here:

- :class:`Served`: ``hotspan serve`` as its own process (the ``hotspan`` console script of this interpreter's
  environment, this checkout first on ``PYTHONPATH``), optionally with ``HOTSPAN_PROMETHEUS_URL``.
- :class:`EngineScraper`: a real Prometheus (the Debian binary, ``tests/prometheus_support.serving``) scraping
  every second the targets of a file_sd file. ``hotspan stack run`` binds the engine on a free port it prints
  nowhere until the manifest, written after the run; :func:`engine_target` finds it while the run goes on, from
  ``/proc`` (the ``service_main engine`` process below the run, its listening socket), and the scraper is pointed
  at it before the replay begins (the engine starts first of the five services). The engine serves HTTPS under
  ``connection_per_request``: the target then says so (``__scheme__``; the certificate is self-made, not checked).
- :func:`run_cell`: one run (optionally beside ``cpu_neighbour.CpuNeighbour``, as the in-process fault matrix
  runs it), then waits, with deadlines and no fixed sleeps, until Hotspan's ingest queue and spool are empty and the
  window's trace and span counts through ``/api/v1/traces`` are the same twice in a row, then diagnoses the window.
  One served Hotspan serves many runs: runs follow each other, and their windows (stack start to last answer) do not
  overlap, so each diagnosis reads its own run's traces only (all land in the default tenant, no auth).

The expected causes come from ``tests/diagnosis/test_diagnosis_faults.py`` (``EXPECTED_CAUSE``, ``INFO_ALLOWED``,
``HOST_CAUSE``), imported, so the table the in-process matrix asserts is the one judged here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, Python puts benchmarks/ first on sys.path, where benchmarks/analysis.py would shadow the analysis
# package the fault matrix's module imports.
if sys.path and Path(sys.path[0]).resolve() == ROOT / "benchmarks":
    sys.path[0] = str(ROOT)
for _path in (ROOT / "tests", ROOT / "tests" / "diagnosis"):
    if str(_path) not in sys.path:
        sys.path.insert(1, str(_path))
from cpu_neighbour import CpuNeighbour  # noqa: E402
from prometheus_support import serving  # noqa: E402
from test_diagnosis_faults import EXPECTED_CAUSE, HOST_CAUSE, INFO_ALLOWED  # noqa: E402

from hotspan import demo  # noqa: E402
from instrumented_stack.workload import WORKLOADS  # noqa: E402

__all__ = [
    "EXPECTED_CAUSE",
    "HOST_CAUSE",
    "INFO_ALLOWED",
    "WORKLOADS",
    "Cell",
    "EngineScraper",
    "Served",
    "Workload",
    "above_info",
    "cell_json",
    "findings_line",
    "judge",
    "load_average",
    "open_served",
    "resolve_workload",
    "run_cell",
]

SETTLE_TIMEOUT_S = 180.0
"""Longest wait, after the stack run exits, for Hotspan to have stored the run's spans."""
STACK_TIMEOUT_EXTRA_S = 300.0
"""A stack run is killed when it lasts this much longer than its ``--duration`` (start-up, draining, exporting)."""
SCRAPE_INTERVAL = "1s"


@dataclass(frozen=True)
class Workload:
    """A name in the tables and the ``hotspan stack run`` arguments that make it."""

    name: str
    args: tuple[str, ...]


DEMO = Workload(
    "demo",
    (
        "--workload",
        "azure-conv",
        "--closed-loop",
        str(demo.USERS),
        "--limit",
        "40",
        "--lookup-latency",
        f"{demo.TOOL_LATENCY_S:g}",
    ),
)
"""``hotspan demo``'s workload (``hotspan/cli.py`` ``_demo`` -> ``hotspan.demo.drive_demo``): the first 40 Azure
conversation rows (its ``--requests`` default) sent by ``hotspan.demo.USERS`` closed-loop users, the tools' lookups at
``hotspan.demo.TOOL_LATENCY_S``. (The demo runs the services as threads of its own process and sends as tenants
``tenant-a``/``tenant-b``; ``hotspan stack run`` runs them as processes, every configured tenant.)"""


def resolve_workload(name: str) -> Workload:
    """``demo`` (:data:`DEMO`) or a workload of the stack's catalogue (``instrumented_stack.workload.WORKLOADS``,
    replayed open-loop as ``hotspan stack run`` does by default)."""
    if name == DEMO.name:
        return DEMO
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}: expected demo or one of {', '.join(WORKLOADS)}")
    return Workload(name, ("--workload", name))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def load_average() -> tuple[float, float, float]:
    """``uptime``'s load averages (1, 5, 15 min)."""
    return os.getloadavg()


def _hotspan() -> list[str]:
    """The ``hotspan`` console script beside this interpreter (as installed), else ``python -m hotspan.cli``."""
    script = Path(sys.executable).with_name("hotspan")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "hotspan.cli"]


def _child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment with this checkout first on ``PYTHONPATH`` (the code under test is the worktree's)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return os.environ | {"PYTHONPATH": path} | (extra or {})


def _wait(check: Any, timeout_s: float, what: str, every_s: float = 0.25) -> Any:
    """Call ``check`` until it returns something truthy; ``TimeoutError`` naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)


class Served:
    """``hotspan serve`` with a fresh data directory under ``workdir``, on free ports given by
    ``HOTSPAN_HTTP_PORT``/``HOTSPAN_GRPC_PORT``, reading engine metrics from ``prometheus_url`` when given
    (``HOTSPAN_PROMETHEUS_URL``). A context manager; ``url`` is its base URL (OTLP/HTTP, REST API and UI)."""

    def __init__(self, workdir: Path, prometheus_url: str | None = None) -> None:
        self.data_dir = workdir / "hotspan-data"
        self.prometheus_url = prometheus_url
        self.url = ""
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Served:
        if self.data_dir.exists():
            shutil.rmtree(self.data_dir)
        self.data_dir.mkdir(parents=True)
        port = free_port()
        env = {"HOTSPAN_HTTP_PORT": str(port), "HOTSPAN_GRPC_PORT": str(free_port())}
        if self.prometheus_url:
            env["HOTSPAN_PROMETHEUS_URL"] = self.prometheus_url
        log = (self.data_dir.parent / "serve.log").open("ab")
        command = [*_hotspan(), "serve", "--data-dir", str(self.data_dir)]
        self._process = subprocess.Popen(command, cwd=self.data_dir.parent, env=_child_env(env), stdout=log, stderr=log)
        log.close()
        self.url = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"hotspan serve exited with {self._process.returncode}; see serve.log")
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
            return False

        try:
            _wait(healthy, 120, "hotspan serve's /healthz")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(60)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def ingest_backlog(self) -> float:
        """Spans admitted or spooled and not yet stored (``hotspan_ingest_queue_spans`` + ``hotspan_spool_spans``
        of its ``/metrics``)."""
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        total = 0.0
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name in ("hotspan_ingest_queue_spans", "hotspan_spool_spans"):
                total += float(value)
        return total

    def window_counts(self, start_ns: int, end_ns: int) -> tuple[int, int]:
        """Traces with a span starting in the window, and their spans, through ``/api/v1/traces``."""
        params = {"start_ns": start_ns, "end_ns": end_ns, "limit": 10_000}
        traces = httpx.get(f"{self.url}/api/v1/traces", params=params, timeout=60).json()["traces"]
        return len(traces), sum(trace["span_count"] for trace in traces)

    def settle(self, start_ns: int, end_ns: int, least_traces: int, timeout_s: float = SETTLE_TIMEOUT_S) -> float:
        """Wait until nothing is left to store and the window's counts (at least ``least_traces`` traces) read the
        same twice 1 s apart; returns the seconds waited. ``TimeoutError`` past ``timeout_s``."""
        started = time.monotonic()
        last: list[tuple[int, int]] = []

        def settled() -> bool:
            if self.ingest_backlog() > 0:
                last.clear()
                return False
            counts = self.window_counts(start_ns, end_ns)
            stable = bool(last) and last[-1] == counts and counts[0] >= least_traces
            last.append(counts)
            return stable

        _wait(settled, timeout_s, f"the run's spans to be stored (counts {last[-3:]})", every_s=1.0)
        return time.monotonic() - started

    def diagnosis(self, start_ns: int, end_ns: int) -> dict[str, Any]:
        """``GET /api/v1/diagnosis`` over the window (the user's call: no other parameter)."""
        response = httpx.get(
            f"{self.url}/api/v1/diagnosis", params={"start_ns": start_ns, "end_ns": end_ns}, timeout=300
        )
        response.raise_for_status()
        return response.json()


@dataclass(frozen=True)
class EngineTarget:
    """The running stack's engine as Prometheus scrapes it: ``host:port`` and whether it serves HTTPS."""

    address: str
    https: bool


def _parent_pids() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                # Fields after the command name (in parentheses, which may hold spaces): state, ppid, ...
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, parent in _parent_pids().items():
        children.setdefault(parent, []).append(pid)
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def _listening_ports(pid: int) -> list[int]:
    """TCP ports ``pid`` listens on (its socket inodes matched against ``/proc/net/tcp{,6}``)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def engine_target(stack_pid: int) -> EngineTarget | None:
    """The engine of the ``hotspan stack run`` process ``stack_pid`` once it listens: the emulator
    (``instrumented_stack.service_main engine``, its one listening port) or ``vllm serve`` (its ``--port``)."""
    for pid in _descendants(stack_pid):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            emulator = "instrumented_stack.service_main" in argv and "engine" in argv
            vllm = "serve" in argv and any(arg.endswith("vllm") for arg in argv[:3])
            if not (emulator or vllm):
                continue
            https = "--ssl-certfile" in argv
            if vllm and "--port" in argv:
                return EngineTarget(f"127.0.0.1:{argv[argv.index('--port') + 1]}", https)
            ports = _listening_ports(pid)
            if ports:
                return EngineTarget(f"127.0.0.1:{ports[0]}", https)
    return None


class EngineScraper:
    """A real Prometheus (Debian's ``prometheus``) scraping, every second, the targets of a file_sd file it
    watches; ``url`` once open. :meth:`point_at` names the engine to scrape (replacing the previous one, whose
    series Prometheus then marks stale), :meth:`clear` none."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir / "prometheus"
        self.targets = self.workdir / "engines.json"
        self.url = ""
        self._scope = contextlib.ExitStack()

    def __enter__(self) -> EngineScraper:
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        self.workdir.mkdir(parents=True)
        self.targets.write_text("[]", encoding="utf-8")
        config = {
            "global": {"scrape_interval": SCRAPE_INTERVAL, "scrape_timeout": "900ms"},
            "scrape_configs": [
                {
                    "job_name": "vllm",
                    "file_sd_configs": [{"files": [str(self.targets)], "refresh_interval": "1s"}],
                    # connection_per_request serves the engine over HTTPS with a certificate made at start.
                    "tls_config": {"insecure_skip_verify": True},
                }
            ],
        }
        self.url = self._scope.enter_context(
            serving("prometheus", self.workdir, config, ["--storage.tsdb.path={workdir}/tsdb"])
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self._scope.__exit__(*exc)

    def _write(self, groups: list[dict[str, Any]]) -> None:
        staged = self.targets.with_suffix(".tmp")
        staged.write_text(json.dumps(groups), encoding="utf-8")
        staged.replace(self.targets)

    def point_at(self, target: EngineTarget) -> None:
        labels = {"__scheme__": "https"} if target.https else {}
        self._write([{"targets": [target.address], "labels": labels}])

    def clear(self) -> None:
        self._write([])

    def scrapes(self, start_ns: int, end_ns: int) -> int:
        """Successful scrapes of the engine within the window (the sum of ``up`` over it)."""
        span_s = max(1, round((end_ns - start_ns) / 1e9))
        query = f'sum(sum_over_time(up{{job="vllm"}}[{span_s}s]))'
        with contextlib.suppress(httpx.HTTPError, KeyError, ValueError, IndexError):
            result = httpx.get(
                f"{self.url}/api/v1/query", params={"query": query, "time": end_ns / 1e9}, timeout=10
            ).json()
            return int(float(result["data"]["result"][0]["value"][1]))
        return 0


@dataclass
class Cell:
    """One run and its diagnosis, as the tables and ``--json`` report it."""

    workload: str
    fault: str
    prometheus: bool
    neighbour: bool
    repeat: int
    expected: str | None = None
    held: bool = False
    verdict: str = ""
    findings: list[dict[str, Any]] = field(default_factory=list)
    trace_count: int = 0
    metrics: str = ""
    rule_errors: list[dict[str, Any]] = field(default_factory=list)
    window: dict[str, int] = field(default_factory=dict)
    stack_summary: str = ""
    prometheus_note: str = ""
    error: str = ""
    wall_s: float = 0.0
    stack_s: float = 0.0
    settle_s: float = 0.0
    diagnosis_s: float = 0.0
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)


def findings_line(findings: Sequence[dict[str, Any]], limit: int | None = None) -> str:
    """``cause:severity:confidence`` of each finding, in the API's ranking."""
    shown = findings if limit is None else findings[:limit]
    text = " ".join(f"{f['cause']}:{f['severity']}:{f['confidence']:.2f}" for f in shown)
    return text + (f" (+{len(findings) - limit})" if limit is not None and len(findings) > limit else "")


def above_info(findings: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in findings if f["severity"] != "info"]


def judge(fault: str, findings: Sequence[dict[str, Any]]) -> tuple[bool, str]:
    """Whether the cell holds, and why not: a fault's expected cause ranks first among the findings other than the
    host's (``cpu_contention``), at warning or worse unless the fault is in ``INFO_ALLOWED``; a clean run has
    nothing above ``info``."""
    if fault == "clean":
        loud = above_info(findings)
        return not loud, "" if not loud else f"{len(loud)} above info: {findings_line(loud)}"
    expected = EXPECTED_CAUSE[fault]
    causes = [f for f in findings if f["cause"] != HOST_CAUSE]
    if not causes:
        return False, "no finding"
    top = causes[0]
    if top["cause"] != expected:
        rank = next((i + 1 for i, f in enumerate(causes) if f["cause"] == expected), None)
        return False, f"top is {top['cause']}; {expected} " + (f"ranked {rank}" if rank else "absent")
    if top["severity"] == "info" and fault not in INFO_ALLOWED:
        return False, f"{expected} only info"
    return True, ""


def _run_stack(
    served: Served,
    workload: Workload,
    fault: str,
    duration_s: float,
    workdir: Path,
    scraper: EngineScraper | None,
    cell: Cell,
) -> dict[str, Any] | None:
    """``hotspan stack run`` against ``served`` (pointing ``scraper`` at its engine while it runs); the manifest,
    or None with ``cell.error`` set."""
    manifest_path = workdir / "manifest.json"
    manifest_path.unlink(missing_ok=True)
    command = [*_hotspan(), "stack", "run", *workload.args, "--duration", f"{duration_s:g}"]
    if fault != "clean":
        command += ["--faults", fault]
    command += ["--endpoint", served.url, "--manifest", str(manifest_path), "--no-progress"]
    log_path = workdir / "stack.log"
    started = time.monotonic()
    with log_path.open("wb") as log:
        # The stack's cache (the trained tokenizer) goes to ./.hotspan of its working directory, as for a user.
        process = subprocess.Popen(command, cwd=workdir, env=_child_env(), stdout=log, stderr=subprocess.STDOUT)
    target: EngineTarget | None = None
    deadline = started + duration_s + STACK_TIMEOUT_EXTRA_S
    try:
        while process.poll() is None:
            if scraper is not None and target is None:
                target = engine_target(process.pid)
                if target is not None:
                    scraper.point_at(target)
            if time.monotonic() > deadline:
                process.terminate()
                process.wait(30)
                cell.error = f"hotspan stack run still running after {deadline - started:.0f} s: killed"
                return None
            time.sleep(0.1)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    cell.stack_s = time.monotonic() - started
    output = log_path.read_text(errors="replace")
    summary = [line for line in output.splitlines() if line.startswith("Stack run")]
    cell.stack_summary = summary[-1] if summary else ""
    if scraper is not None:
        cell.prometheus_note = (
            "engine never found under the stack run's processes: not scraped"
            if target is None
            else f"engine {'https://' if target.https else ''}{target.address}"
        )
    if process.returncode != 0 or not manifest_path.is_file():
        cell.error = f"hotspan stack run exited {process.returncode}: {output.strip()[-600:]}"
        return None
    return json.loads(manifest_path.read_text())


def run_cell(
    served: Served,
    workload: Workload,
    fault: str,
    *,
    duration_s: float,
    workdir: Path,
    scraper: EngineScraper | None = None,
    neighbour: bool = False,
    repeat: int = 1,
) -> Cell:
    """One cell: the stack run (beside the CPU neighbour when ``neighbour``), its spans stored, the diagnosis of its
    window, judged (:func:`judge`)."""
    cell = Cell(workload.name, fault, scraper is not None, neighbour, repeat, EXPECTED_CAUSE.get(fault))
    cell.load_before = load_average()
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        spin = CpuNeighbour(max_s=duration_s + STACK_TIMEOUT_EXTRA_S + 60) if neighbour else contextlib.nullcontext()
        with spin:
            manifest = _run_stack(served, workload, fault, duration_s, workdir, scraper, cell)
        if scraper is not None:
            scraper.clear()
        if manifest is None:
            cell.verdict = cell.error
            return cell
        start_ns, end_ns = manifest["window"]["start_unix_ns"], manifest["window"]["end_unix_ns"]
        cell.window = {"start_ns": start_ns, "end_ns": end_ns}
        if scraper is not None:
            scrapes = scraper.scrapes(start_ns, end_ns)
            cell.prometheus_note += f", {scrapes} successful scrapes in the window"
        least = len(manifest.get("trace_ids", []))
        try:
            cell.settle_s = served.settle(start_ns, end_ns, least)
        except TimeoutError as exc:
            cell.error = f"{exc}; diagnosed anyway"
        before = time.monotonic()
        report = served.diagnosis(start_ns, end_ns)
        cell.diagnosis_s = time.monotonic() - before
        cell.findings = report["findings"]
        cell.trace_count = report["trace_count"]
        cell.metrics = report["metrics"]
        cell.rule_errors = report["rule_errors"]
        cell.held, cell.verdict = judge(fault, cell.findings)
        if cell.rule_errors:
            cell.verdict += f" [rule errors: {', '.join(e['cause'] for e in cell.rule_errors)}]"
    except Exception as exc:  # one failed cell is reported, the matrix goes on
        cell.error = f"{type(exc).__name__}: {exc}"
        cell.verdict = cell.error
    finally:
        cell.wall_s = time.monotonic() - started
        cell.load_after = load_average()
    return cell


def cell_json(cell: Cell) -> dict[str, Any]:
    """A cell for ``--json``: every field, findings whole (cause, severity, confidence, title, evidence, remedy)."""
    return asdict(cell)


@contextlib.contextmanager
def open_served(workdir: Path, prometheus: bool) -> Iterator[tuple[Served, EngineScraper | None]]:
    """A served Hotspan (reading a real Prometheus that scrapes the stack's engine when ``prometheus``)."""
    with contextlib.ExitStack() as scope:
        scraper = scope.enter_context(EngineScraper(workdir)) if prometheus else None
        served = scope.enter_context(Served(workdir, scraper.url if scraper else None))
        yield served, scraper


SETTINGS = {"off": (False,), "on": (True,), "both": (False, True)}
"""``--prometheus`` / ``--neighbour`` choices: the settings each runs."""


def add_matrix_arguments(parser: argparse.ArgumentParser, default_workloads: Sequence[str]) -> None:
    """The arguments every served matrix takes: ``--workload`` (repeatable), ``--duration`` (seconds),
    ``--prometheus`` and ``--neighbour`` (:data:`SETTINGS`), ``--json`` and ``--workdir``."""
    parser.add_argument("--workload", action="append", help=f"repeatable; default {', '.join(default_workloads)}")
    parser.add_argument("--duration", type=float, default=30.0, help="hotspan stack run --duration (seconds)")
    parser.add_argument("--prometheus", choices=tuple(SETTINGS), default="both")
    parser.add_argument("--neighbour", choices=tuple(SETTINGS), default="off")
    parser.add_argument("--json", type=Path, help="write every cell, findings whole, here")
    parser.add_argument("--workdir", type=Path, help="keep the servers' data and logs here (default: a temporary one)")


def run_matrix(
    args: argparse.Namespace,
    workloads: Sequence[Workload],
    faults: Sequence[str],
    repeats: int,
    on_cell: Callable[[Cell], None],
) -> list[Cell]:
    """Every cell of Prometheus setting x neighbour x workload x fault x repeat (``args`` from
    :func:`add_matrix_arguments`), one served Hotspan per Prometheus setting; ``on_cell`` is called as each cell
    ends, and ``args.json`` rewritten with every cell so far."""
    cells: list[Cell] = []
    with tempfile.TemporaryDirectory(prefix="hotspan-matrix-") as tmp:
        root = args.workdir or Path(tmp)
        for prometheus in SETTINGS[args.prometheus]:
            workdir = root / f"prometheus-{'on' if prometheus else 'off'}"
            with open_served(workdir, prometheus) as (served, scraper):
                print(f"# hotspan serve at {served.url}" + (f", Prometheus {scraper.url}" if scraper else ""))
                for neighbour in SETTINGS[args.neighbour]:
                    for workload in workloads:
                        for fault in faults:
                            for repeat in range(1, repeats + 1):
                                cell = run_cell(
                                    served,
                                    workload,
                                    fault,
                                    duration_s=args.duration,
                                    workdir=workdir / "stack",
                                    scraper=scraper,
                                    neighbour=neighbour,
                                    repeat=repeat,
                                )
                                cells.append(cell)
                                on_cell(cell)
                                sys.stdout.flush()
                                if args.json:
                                    args.json.parent.mkdir(parents=True, exist_ok=True)
                                    body = json.dumps([cell_json(c) for c in cells], indent=1)
                                    args.json.write_text(body + "\n", encoding="utf-8")
    return cells
