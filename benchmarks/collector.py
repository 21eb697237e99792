"""The collector role's own cost per span, with the store elsewhere (issue 34).

A collector (``--role collector``) receives OTLP, checks it, spools it and builds the insert's columns; in a
deployment the ClickHouse cluster that stores the rows runs on other machines. Here the store is the embedded
engine in the same process, so its cost is taken out: ``otel_traces`` is replaced by a table of the same columns
on ClickHouse's ``Null`` engine (it parses the insert and discards it) and the materialized views reading it are
dropped (on a cluster they run on the ClickHouse nodes). What is left is receive + check + spool + column build +
send.

Measured per protocol, side by side in one run, over ``--spans`` realistic spans (``benchmarks/ingest.py``'s
requests: 512 spans each, 842 protobuf bytes per span) sent by a separate client process over ``--senders``
connections, until every request is acknowledged and inserted (``IngestPipeline.flush``):

- wall-clock spans/s;
- the server process's CPU seconds (user + system, every thread: receivers, decoder pool, spool, inserter and the
  engine's own threads) per span, and from it **spans/s per core** = spans / CPU seconds: what one core of a
  collector sustains, independent of how busy the shared machine is (the client's CPU is its own process's).

Goal (issue 34): >= 137k spans/s per core, the OpenTelemetry Collector's ClickHouse exporter's published figure.
``--profile DIR`` also records a py-spy profile of the server (``py-spy`` beside the interpreter or on the PATH;
collapsed stacks, and the functions with most samples printed): the thread holding the GIL only. ``--perf DIR``
records ``perf record`` instead (every thread on CPU: Python's, the engine's, gRPC's, the kernel's work for them),
prints the libraries and functions with most samples, and the CPU per span without the embedded engine's share
(:func:`engine_share`): what the collector costs when the store is a ClickHouse elsewhere, for the CPU breakdown in
benchmarks/README.md.

Run: ``python benchmarks/collector.py [--spans 200000] [--senders 8] [--profile DIR | --perf DIR]``. The last line is
``collector_spans_per_core: N`` (the lower of the two protocols).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if sys.path and Path(sys.path[0]).resolve() == REPO / "benchmarks":
    sys.path[0] = str(REPO)

from benchmarks.ingest import build_requests, join_client, run_client  # noqa: E402

GOAL_SPANS_PER_CORE = 137_000
"""The OpenTelemetry Collector's ClickHouse exporter, spans/s per core (its published benchmark)."""


def null_store(dsn: str, database: str) -> None:
    """Migrate ``database`` and make ``otel_traces`` discard what it is sent: the same columns on the ``Null``
    engine, and no materialized view reading it."""
    from storage.clickhouse import ClickHouse
    from storage.migrations import apply_migrations

    ch = ClickHouse(dsn, database)
    apply_migrations(ch)
    views = ch.query_rows(
        "SELECT arrayJoin(dependencies_table) FROM system.tables WHERE database = {db:String} AND name = 'otel_traces'",
        {"db": database},
    )
    for (view,) in views:
        ch.command(f"DROP VIEW {view}")
    ch.command("CREATE TABLE otel_traces_null AS otel_traces ENGINE = Null")
    ch.command("EXCHANGE TABLES otel_traces AND otel_traces_null")
    ch.close()


def cpu_seconds() -> float:
    """This process's CPU time so far, user + system, every thread."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(
    kind: str,
    target: str,
    bodies: list[bytes],
    senders: int,
    flush: object,
    profile: Path | None = None,
    perf: Path | None = None,
) -> tuple[float, float]:
    """``(wall seconds, server CPU seconds)`` from the client's first send until every request is acknowledged
    and inserted; with ``profile``, a py-spy recording of that interval (:func:`profiled`), with ``perf`` a
    ``perf record`` of it (:func:`perf_recorded`)."""
    client, go, done = run_client(kind, target, bodies, senders)
    recorder = profiled(profile, kind) if profile else perf_recorded(perf, kind) if perf else None
    time.sleep(2.0)  # let the client process load its bodies (and py-spy attach) before the clock starts
    cpu, start = cpu_seconds(), time.perf_counter()
    go.set()  # type: ignore[attr-defined]
    done.wait()  # type: ignore[attr-defined]
    if not flush(60.0):  # type: ignore[operator]
        raise RuntimeError("the pipeline did not drain within 60 s")
    elapsed, used = time.perf_counter() - start, cpu_seconds() - cpu
    if recorder is not None:
        recorder.send_signal(signal.SIGINT)  # py-spy and perf write their file on an interrupt
        recorder.wait()
    join_client(client, kind)
    return elapsed, used


def profiled(directory: Path, name: str) -> subprocess.Popen[bytes]:
    """A py-spy recording of this process into ``directory/name.txt`` (collapsed stacks): the thread holding the
    GIL at each sample, so idle threads (waiting on a condition or a socket) do not count."""
    directory.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
            or "py-spy",
            "record",
            "--pid",
            str(os.getpid()),
            "--rate",
            "200",
            "--gil",
            "--format",
            "raw",
            "--output",
            str(directory / f"{name}.txt"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def perf_recorded(directory: Path, name: str) -> subprocess.Popen[bytes]:
    """A ``perf record`` of this process into ``directory/name.data``: on-CPU samples of every thread (Python's,
    the engine's, gRPC's) in user and kernel code, which py-spy's GIL view cannot see. Needs ``perf`` and
    ``kernel.perf_event_paranoid`` <= 2 (a process may profile its own children)."""
    directory.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            "perf",
            "record",
            "-e",
            "cpu-clock",
            "-F",
            "999",
            "-p",
            str(os.getpid()),
            "-o",
            str(directory / f"{name}.data"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


ENGINE_LIBRARY = "_chdb.abi3.so"
"""The embedded ClickHouse's shared object: on a cluster, its work runs on the ClickHouse nodes."""


def perf_rows(data: Path, key: str) -> list[tuple[list[str], float]]:
    """The rows of ``perf report --sort key`` over a ``perf record`` file: the key's fields and the share of
    samples, most first."""
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--no-children", "--sort", key, "--stdio", "-q"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = []
    for line in report.splitlines():
        share, _, rest = line.strip().partition(" ")
        if share.endswith("%"):
            rows.append(([field for field in rest.split() if field not in ("[.]", "[k]")], float(share[:-1]) / 100))
    return rows


def perf_shares(data: Path, key: str, limit: int = 15) -> list[tuple[str, float]]:
    """The ``key`` (``dso`` or ``symbol``) with most samples in a ``perf record`` file, with their share."""
    return [(" ".join(fields), share) for fields, share in perf_rows(data, key)[:limit]]


def engine_share(data: Path) -> float:
    """The share of a ``perf record`` file's samples that the embedded engine took: every sample in its library,
    and every sample of a thread that spent most of its own there (its pools' threads: their system calls and
    allocations). Samples of the engine's code in the C library or the kernel called from a Python thread stay
    with the collector, so the collector's own share is overstated, not understated."""
    threads: dict[str, dict[str, float]] = {}
    for fields, share in perf_rows(data, "pid,dso"):
        thread, library = fields[0], fields[-1]
        libraries = threads.setdefault(thread, {})
        libraries[library] = libraries.get(library, 0.0) + share
    total = 0.0
    for libraries in threads.values():
        own, thread_total = libraries.get(ENGINE_LIBRARY, 0.0), sum(libraries.values())
        total += thread_total if own > thread_total / 2 else own
    return total


def top_functions(raw: Path, limit: int = 15) -> list[tuple[str, float]]:
    """The functions with most self samples in a py-spy ``raw`` (collapsed stacks) file, with their share."""
    own: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frame = stack.split(";")[-1]
        own[frame] = own.get(frame, 0) + int(count)
        total += int(count)
    ranked = sorted(own.items(), key=lambda item: -item[1])[:limit]
    return [(frame, samples / max(total, 1)) for frame, samples in ranked]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=200_000, help="spans per protocol (default 200000)")
    parser.add_argument("--senders", type=int, default=8, help="concurrent client connections (default 8)")
    parser.add_argument("--profile", type=Path, help="record a py-spy profile per protocol into this directory")
    parser.add_argument("--perf", type=Path, help="record a perf profile (every thread, on CPU) per protocol here")
    args = parser.parse_args()

    from hotspan.server import start_server
    from hotspan.settings import load_settings

    data_dir = Path(tempfile.mkdtemp(prefix="hotspan-collector-"))
    dsn, database = f"chdb://{data_dir / 'clickhouse'}", f"bench_{uuid.uuid4().hex[:8]}"
    null_store(dsn, database)
    settings = load_settings(
        data_dir=data_dir,
        clickhouse_dsn=dsn,
        clickhouse_database=database,
        role="collector",
        http_port=0,
        grpc_port=0,
    )
    server = start_server(settings)
    assert server.pipeline is not None
    gc.freeze()  # as `hotspan serve` does once its server is up (hotspan/cli.py)
    print(f"load average before: {os.getloadavg()[0]:.1f} (2 vCPUs shared)")
    rates: dict[str, float] = {}
    try:
        warm = build_requests(20_000, seed=1)
        measure("http", f"{server.base_url}/v1/traces", warm, args.senders, server.pipeline.flush)
        for kind, target, seed in (
            ("http", f"{server.base_url}/v1/traces", 7),
            ("grpc", f"127.0.0.1:{server.grpc_port}", 8),
        ):
            bodies = build_requests(args.spans, seed=seed)
            wall, cpu = measure(kind, target, bodies, args.senders, server.pipeline.flush, args.profile, args.perf)
            rates[kind] = args.spans / cpu
            print(
                f"{kind:>4}: {args.spans / wall:>9,.0f} spans/s wall, {cpu:.2f} CPU s = "
                f"{1e6 * cpu / args.spans:.2f} CPU µs/span = {rates[kind]:>9,.0f} spans/s per core "
                f"(load {os.getloadavg()[0]:.1f})"
            )
            if args.profile:
                for frame, share in top_functions(args.profile / f"{kind}.txt"):
                    print(f"      {share:6.1%}  {frame}")
            if args.perf:
                data = args.perf / f"{kind}.data"
                engine = engine_share(data)
                own = cpu * (1 - engine)
                print(
                    f"      the embedded engine's share {engine:.1%}; without it {1e6 * own / args.spans:.2f} CPU "
                    f"µs/span = {args.spans / own:,.0f} spans/s per core (the store elsewhere)"
                )
                for key in ("dso", "symbol"):
                    for name, share in perf_shares(data, key):
                        print(f"      {share:6.1%}  {key} {name}")
    finally:
        server.stop()
    lower = min(rates.values())
    print(f"goal {GOAL_SPANS_PER_CORE:,} spans/s per core: {'met' if lower >= GOAL_SPANS_PER_CORE else 'not met'}")
    print(f"collector_spans_per_core: {lower:.0f}")


if __name__ == "__main__":
    main()
