"""A CPU-burning neighbour for tests that must hold on a busy host: a few processes spinning at the test's own
priority for as long as the ``with`` block runs.

Bounded twice over: the block's exit terminates and reaps every process, and each process also stops by itself
after ``max_s`` seconds, so a test killed mid-run (timeout, ``kill -9`` of pytest) leaves nothing spinning for
long. The processes are plain ``python -c`` children of the test process (not multiprocessing), so no pytest
state is forked into them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import TracebackType
from typing import Self

SPIN = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"
"""Each process: spin on the CPU (no sleep, no I/O) until its deadline."""


def default_processes() -> int:
    """Two spinning processes per CPU the test may use: every core busy with a run queue behind it, as a shared
    host with a load average of a few times its cores is."""
    return 2 * len(os.sched_getaffinity(0))


class CpuNeighbour:
    """``processes`` spinning Python processes while open (a context manager); each stops itself after ``max_s``
    seconds even when never told to.

    Raises:
        RuntimeError: on entry, when a process exited before the block began (it could not start).
    """

    def __init__(self, processes: int | None = None, max_s: float = 600.0) -> None:
        self.processes = processes if processes is not None else default_processes()
        self.max_s = max_s
        self._children: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Self:
        for _ in range(self.processes):
            self._children.append(subprocess.Popen([sys.executable, "-c", SPIN, str(self.max_s)]))
        dead = [child.pid for child in self._children if child.poll() is not None]
        if dead:
            self.__exit__(None, None, None)
            raise RuntimeError(f"CPU neighbour processes {dead} exited at start")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        for child in self._children:
            child.terminate()
        deadline = time.monotonic() + 5.0
        for child in self._children:
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        self._children.clear()

    @property
    def pids(self) -> list[int]:
        """Process IDs of the neighbour's processes (empty once closed)."""
        return [child.pid for child in self._children]

    @property
    def running(self) -> list[int]:
        """Process IDs of those still spinning (a process past its ``max_s`` has stopped by itself)."""
        return [child.pid for child in self._children if child.poll() is None]
