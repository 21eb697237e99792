"""The diagnosis fault matrix, run several times in a row quiet and beside a CPU-burning neighbour (issue 18).

    .venv/bin/python benchmarks/busy_host_matrix.py [--runs 3] [--hosts quiet,neighbour]

Each run is one pytest session of ``tests/diagnosis/test_diagnosis_faults.py`` restricted to one host
(``-k quiet``, or ``-k neighbour`` with ``HOTSPAN_FAULT_MATRIX_NEIGHBOUR=all`` so every fault runs beside the
neighbour, not only the timing ones CI runs). While it runs, the load average (1 min) is sampled every second.
Prints one line per run: host, outcome, wall seconds, load average min / mean / max, and the failed tests with
their assertion messages (the run's findings); the last line is ``busy_host_matrix_passed_runs: <passed>/<runs>``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MATRIX = "tests/diagnosis/test_diagnosis_faults.py"
HOSTS = ("quiet", "neighbour")


def run_matrix(host: str) -> tuple[bool, float, list[float], list[str]]:
    """One pytest session of the matrix on ``host``: passed, wall seconds, load averages sampled each second
    (1 min), and the ``FAILED`` lines of its summary."""
    # A wide "terminal" keeps each FAILED line's assertion message (the run's findings) whole.
    env = {**os.environ, "HOTSPAN_FAULT_MATRIX_NEIGHBOUR": "all", "COLUMNS": "1000"}
    command = [sys.executable, "-m", "pytest", MATRIX, "-q", "-p", "no:randomly", "--tb=no", "-k", host]
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            loads.append(os.getloadavg()[0])
            done.wait(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    started = time.monotonic()
    sampler.start()
    try:
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    finally:
        done.set()
        sampler.join()
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    return result.returncode == 0, time.monotonic() - started, loads, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per host, in a row")
    parser.add_argument("--hosts", default=",".join(HOSTS), help="comma-separated, of: " + ", ".join(HOSTS))
    args = parser.parse_args()
    hosts = [host for host in args.hosts.split(",") if host]
    if not hosts or set(hosts) - set(HOSTS):
        parser.error(f"--hosts takes {', '.join(HOSTS)}")
    passed = 0
    for host in hosts:
        for index in range(1, args.runs + 1):
            ok, seconds, loads, failed = run_matrix(host)
            passed += ok
            load = f"{min(loads):.1f} / {statistics.fmean(loads):.1f} / {max(loads):.1f}" if loads else "-"
            print(f"{host} run {index}: {'passed' if ok else 'FAILED'} in {seconds:.0f} s, load average {load}")
            for line in failed:
                print(f"    {line}")
            sys.stdout.flush()
    print(f"busy_host_matrix_passed_runs: {passed}/{args.runs * len(hosts)}")


if __name__ == "__main__":
    main()
