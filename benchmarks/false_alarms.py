"""False alarms of diagnosis on clean runs, as users run them (issue 29): every shipped workload through
``hotspan serve`` + ``hotspan stack run`` (no fault) + ``GET /api/v1/diagnosis``, counting findings above ``info``.

    .venv/bin/python benchmarks/false_alarms.py [--runs 3] [--workload NAME ...] [--duration 30]
        [--prometheus off|on|both] [--neighbour off|on|both] [--json PATH]

Workloads: by default every one of the stack's catalogue (``instrumented_stack.workload.WORKLOADS``), replayed
open-loop as ``hotspan stack run`` does by default; ``demo`` (``hotspan demo``'s workload) may be named too. Each run
is one clean cell of ``benchmarks/served_stack.py`` (one served Hotspan per Prometheus setting, a real Prometheus
scraping the stack's engine when on). Prints each run's findings as it finishes, then every finding above ``info``
whole (cause, severity, confidence, title, evidence); the last line is ``false_alarms_above_info: <count>``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from served_stack import (
    WORKLOADS,
    Cell,
    above_info,
    cell_json,
    findings_line,
    open_served,
    resolve_workload,
    run_cell,
)

SETTINGS = {"off": (False,), "on": (True,), "both": (False, True)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="clean runs per workload and setting")
    parser.add_argument("--workload", action="append", help=f"repeatable; default {', '.join(WORKLOADS)}")
    parser.add_argument("--duration", type=float, default=30.0, help="hotspan stack run --duration (seconds)")
    parser.add_argument("--prometheus", choices=tuple(SETTINGS), default="both")
    parser.add_argument("--neighbour", choices=tuple(SETTINGS), default="off")
    parser.add_argument("--json", type=Path, help="write every run, findings whole, here")
    parser.add_argument("--workdir", type=Path, help="keep the servers' data and logs here (default: a temporary one)")
    args = parser.parse_args()
    try:
        workloads = [resolve_workload(name) for name in args.workload or WORKLOADS]
    except ValueError as exc:
        parser.error(str(exc))

    cells: list[Cell] = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hotspan-false-alarms-") as tmp:
        root = args.workdir or Path(tmp)
        for prometheus in SETTINGS[args.prometheus]:
            workdir = root / f"prometheus-{'on' if prometheus else 'off'}"
            with open_served(workdir, prometheus) as (served, scraper):
                for neighbour in SETTINGS[args.neighbour]:
                    for workload in workloads:
                        for run in range(1, args.runs + 1):
                            cell = run_cell(
                                served,
                                workload,
                                "clean",
                                duration_s=args.duration,
                                workdir=workdir / "stack",
                                scraper=scraper,
                                neighbour=neighbour,
                                repeat=run,
                            )
                            cells.append(cell)
                            print(
                                f"{cell.workload:<10} prom={'on ' if prometheus else 'off'} "
                                f"nb={'on ' if neighbour else 'off'} run {run}: {len(above_info(cell.findings))} "
                                f"above info in {cell.wall_s:.0f} s (load {cell.load_before[0]:.1f}->"
                                f"{cell.load_after[0]:.1f}, {cell.trace_count} traces, metrics {cell.metrics or '-'})"
                                f": {findings_line(cell.findings) or '-'}"
                                + (f"  [error: {cell.error}]" if cell.error else ""),
                                flush=True,
                            )
                            if args.json:
                                args.json.parent.mkdir(parents=True, exist_ok=True)
                                body = json.dumps([cell_json(c) for c in cells], indent=1)
                                args.json.write_text(body + "\n", encoding="utf-8")
    alarms = [(cell, finding) for cell in cells for finding in above_info(cell.findings)]
    failed = [cell for cell in cells if cell.error and not cell.findings]
    print(f"\n# {len(cells)} clean runs in {time.monotonic() - began:.0f} s; {len(alarms)} findings above info")
    for cell, finding in alarms:
        print(
            f"{cell.workload} prom={'on' if cell.prometheus else 'off'} nb={'on' if cell.neighbour else 'off'} "
            f"run {cell.repeat}: {finding['cause']} {finding['severity']} confidence {finding['confidence']:.2f}: "
            f"{finding['title']}\n    evidence: {json.dumps(finding['evidence'])}"
        )
    for cell in failed:
        print(f"{cell.workload} run {cell.repeat}: no diagnosis: {cell.error}")
    print(f"false_alarms_above_info: {len(alarms)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
