"""``/healthz`` off the hot path: storage reachability measured in the background, answered from memory.

A liveness probe must get its answer fast whatever the server is doing: a ``SELECT 1`` on a handle that a long
read or a large insert holds, or on a worker thread that decoding requests keeps busy, can take tens of seconds,
and a probe that waits that long kills a healthy server. :class:`StorageProbe` runs ``SELECT 1`` on a handle of
its own every ``interval_s`` on its own thread; the route reads its last result and the ingest pipeline's insert
state, both in memory, on the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from storage.clickhouse import ClickHouse

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProbeResult:
    """The last storage probe: ``ok``, a short ``detail`` when not, and when it finished (``time.monotonic``)."""

    ok: bool
    detail: str
    at: float


class StorageProbe:
    """Checks storage every ``interval_s`` seconds on a daemon thread (start with :meth:`start`).

    Args:
        open_handle: opens the probe's own ClickHouse handle (at start, and again after a failure).
        interval_s: time between probes, seconds.
    """

    def __init__(self, open_handle: Callable[[], ClickHouse], interval_s: float = 2.0) -> None:
        self._open_handle = open_handle
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._last = ProbeResult(True, "not probed yet", time.monotonic())
        self._thread = threading.Thread(target=self._run, name="hotspan-health-probe", daemon=True)

    def start(self) -> None:
        """Start probing."""
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop probing; waits up to ``timeout_s`` for a probe in progress."""
        self._stop.set()
        self._thread.join(timeout_s)

    def storage(self) -> tuple[bool, str]:
        """``(ok, text)`` for the health answer: ``"ok"``, the last failure, or how long a probe has been stuck.
        Non-blocking."""
        last = self._last
        stale_s = time.monotonic() - last.at
        if stale_s > 3 * self._interval_s + 5:
            return False, f"unavailable: no answer to a probe for {stale_s:.0f} s"
        return last.ok, last.detail

    def _run(self) -> None:
        handle: ClickHouse | None = None
        while not self._stop.is_set():
            try:
                handle = handle or self._open_handle()
                handle.query_rows("SELECT 1")
                self._last = ProbeResult(True, "ok", time.monotonic())
            except Exception as exc:  # anything storage raises means "not reachable now"
                detail = f"unavailable: {type(exc).__name__}: {str(exc)[:200]}"
                self._last = ProbeResult(False, detail, time.monotonic())
                if handle is not None:
                    handle.close()
                handle = None
            self._stop.wait(self._interval_s)
        if handle is not None:
            handle.close()
