"""The diagnosis fault matrix on what users run (issue 29): each fault switch of the instrumented stack through
``hotspan serve`` + ``hotspan stack run`` + ``GET /api/v1/diagnosis``, and whether the right cause is named.

    .venv/bin/python benchmarks/diagnosis_matrix.py [--workload azure-conv --workload demo] [--faults clean,...]
        [--duration 30] [--repeats 1] [--prometheus off|on|both] [--neighbour off|on|both] [--json PATH]

Cells: workload x fault (``clean`` plus every switch of ``instrumented_stack.faults.FAULTS``) x Prometheus x CPU
neighbour x repeat. One ``hotspan serve`` (fresh data directory, free ports) serves every cell of one Prometheus
setting; with Prometheus on, a real Prometheus scrapes the running stack's engine every second and the server reads
it (``HOTSPAN_PROMETHEUS_URL``). Each cell runs ``hotspan stack run <workload> --duration D [--faults F]`` against it
(the stack's defaults otherwise; beside ``tests/cpu_neighbour.CpuNeighbour`` when the neighbour is on), waits until
the run's spans are stored, then asks for the diagnosis of the run's window (``benchmarks/served_stack.py``).

A fault cell holds when its expected cause (``tests/diagnosis/test_diagnosis_faults.py``'s ``EXPECTED_CAUSE``)
ranks first among the findings other than ``cpu_contention``, at ``warning`` or worse unless the fault is in its
``INFO_ALLOWED``; a clean cell holds when no finding is above ``info``. Workloads: ``demo`` (``hotspan demo``'s:
40 Azure conversation rows by six closed-loop users, ``served_stack.DEMO``) or a name of the stack's catalogue
(open-loop replay).

Prints a line per cell as it finishes (held, findings ``cause:severity:confidence`` in the API's ranking, seconds,
load average), then the table; the last line is ``diagnosis_matrix_cells_held_share: <held / cells>``.
"""

from __future__ import annotations

import argparse
import sys
import time

from served_stack import EXPECTED_CAUSE, Cell, add_matrix_arguments, findings_line, resolve_workload, run_matrix

DEFAULT_WORKLOADS = ("azure-conv", "demo")


def _row(cell: Cell) -> str:
    held = "held" if cell.held else "FAIL"
    top = findings_line(cell.findings, limit=None if cell.held else 3) or "-"
    load = f"{cell.load_before[0]:.1f}->{cell.load_after[0]:.1f}"
    extra = f"  [{cell.verdict}]" if not cell.held and cell.verdict else ""
    return (
        f"{cell.workload:<10} {cell.fault:<26} prom={'on ' if cell.prometheus else 'off'} "
        f"nb={'on ' if cell.neighbour else 'off'} r{cell.repeat} {held} {cell.wall_s:5.0f}s load {load:<9} "
        f"traces {cell.trace_count:<4} expect {cell.expected or 'nothing above info'}: {top}{extra}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_matrix_arguments(parser, DEFAULT_WORKLOADS)
    parser.add_argument("--faults", default="clean," + ",".join(EXPECTED_CAUSE), help="comma-separated; clean = none")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    try:
        workloads = [resolve_workload(name) for name in args.workload or DEFAULT_WORKLOADS]
    except ValueError as exc:
        parser.error(str(exc))
    faults = [name for name in args.faults.split(",") if name]
    unknown = set(faults) - set(EXPECTED_CAUSE) - {"clean"}
    if unknown:
        parser.error(f"unknown faults {sorted(unknown)}: clean or {', '.join(EXPECTED_CAUSE)}")

    began = time.monotonic()
    cells = run_matrix(args, workloads, faults, args.repeats, lambda cell: print(_row(cell)))
    held = sum(cell.held for cell in cells)
    print(f"\n# {len(cells)} cells in {time.monotonic() - began:.0f} s; {held} held")
    for cell in cells:
        print(_row(cell))
        if cell.prometheus_note:
            print(f"    prometheus: {cell.prometheus_note}; diagnosis metrics: {cell.metrics}")
        if cell.error:
            print(f"    error: {cell.error}")
    print(f"diagnosis_matrix_cells_held_share: {held / len(cells) if cells else 0:.3f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
