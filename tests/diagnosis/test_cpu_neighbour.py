"""The CPU-burning neighbour of the busy-host fault matrix: it burns CPU while open and leaves nothing behind."""

from __future__ import annotations

import os
import time
from pathlib import Path

from cpu_neighbour import CpuNeighbour


def _cpu_ticks(pid: int) -> int:
    """User + system CPU time the process has used, in clock ticks (``/proc/<pid>/stat`` fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_neighbour_spins_while_open_and_leaves_nothing_behind() -> None:
    with CpuNeighbour(2, max_s=60.0) as neighbour:
        pids = neighbour.pids
        assert len(pids) == 2 and neighbour.running == pids
        deadline = time.monotonic() + 10.0
        while not all(_cpu_ticks(pid) > 0 for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_cpu_ticks(pid) > 0 for pid in pids)
    assert neighbour.pids == [] and not any(_exists(pid) for pid in pids)


def test_a_neighbour_nobody_stops_stops_by_itself() -> None:
    neighbour = CpuNeighbour(1, max_s=0.2).__enter__()
    try:
        deadline = time.monotonic() + 10.0
        while neighbour.running and time.monotonic() < deadline:
            time.sleep(0.05)
        assert neighbour.running == []
    finally:
        neighbour.__exit__(None, None, None)
