"""A background worker that runs one callable now and again every ``interval_s`` on a daemon thread, until
stopped: the poll loop of the trace pipeline and of the SLO evaluator.

It lives here, in the lowest layer both of those may import (``processors.pipeline`` and ``alerts`` sit above
``analysis``), and imports nothing of Hotspan, so it keeps the rest of :mod:`analysis` free of I/O.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable


class PeriodicWorker:
    """Calls ``work`` on a daemon thread named ``name``, then waits ``interval_s()`` seconds, until :meth:`stop`.

    An exception from ``work`` is logged to ``log`` with ``failure`` (a %-format taking the interval in seconds,
    e.g. ``"poll failed; retrying in %.1f s"``) and the loop goes on: what runs periodically recovers from
    outages by running again.

    Args:
        work: one round of work; its return value is ignored.
        interval_s: seconds between the end of one round and the start of the next, read before each wait
            (a callable, so a replaced config takes effect).
        name: the thread's name.
        log: where failures are logged.
        failure: the log message of a failed round (see above).

    Thread safety: :meth:`start` and :meth:`stop` are meant for one controlling thread; :attr:`stopping` may
    be read from any thread (``work`` reads it to end a long round early).
    """

    def __init__(
        self,
        work: Callable[[], object],
        interval_s: Callable[[], float],
        *,
        name: str,
        log: logging.Logger,
        failure: str,
    ) -> None:
        self._work = work
        self._interval_s = interval_s
        self._name = name
        self._log = log
        self._failure = failure
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the thread was started and not stopped since."""
        return self._thread is not None

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called since the last :meth:`start`."""
        return self._stop.is_set()

    def start(self) -> None:
        """Start the thread (first round now); does nothing while it runs."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread after its current round; waits up to ``timeout_s`` seconds for it to end."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._work()
            except Exception:
                self._log.exception(self._failure, self._interval_s())
            self._stop.wait(self._interval_s())
