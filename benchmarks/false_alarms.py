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
import time

from served_stack import WORKLOADS, Cell, above_info, add_matrix_arguments, findings_line, resolve_workload, run_matrix


def _line(cell: Cell) -> str:
    return (
        f"{cell.workload:<10} prom={'on ' if cell.prometheus else 'off'} nb={'on ' if cell.neighbour else 'off'} "
        f"run {cell.repeat}: {len(above_info(cell.findings))} above info in {cell.wall_s:.0f} s (load "
        f"{cell.load_before[0]:.1f}->{cell.load_after[0]:.1f}, {cell.trace_count} traces, metrics "
        f"{cell.metrics or '-'}): {findings_line(cell.findings) or '-'}"
        + (f"  [error: {cell.error}]" if cell.error else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_matrix_arguments(parser, WORKLOADS)
    parser.add_argument("--runs", type=int, default=3, help="clean runs per workload and setting")
    args = parser.parse_args()
    try:
        workloads = [resolve_workload(name) for name in args.workload or WORKLOADS]
    except ValueError as exc:
        parser.error(str(exc))

    began = time.monotonic()
    cells = run_matrix(args, workloads, ["clean"], args.runs, lambda cell: print(_line(cell)))
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
