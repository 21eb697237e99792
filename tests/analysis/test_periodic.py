"""The periodic background worker (analysis.periodic) behind the trace pipeline and the SLO evaluator."""

from __future__ import annotations

import logging
import threading

import pytest

from analysis.periodic import PeriodicWorker

LOG = logging.getLogger("tests.periodic")


def test_runs_at_once_and_again_until_stopped() -> None:
    rounds = threading.Semaphore(0)
    worker = PeriodicWorker(rounds.release, lambda: 0.01, name="test-periodic", log=LOG, failure="failed %.1f")
    assert not worker.running
    worker.start()
    worker.start()  # a second start while running does nothing
    assert worker.running
    assert all(rounds.acquire(timeout=5) for _ in range(3))
    worker.stop()
    assert not worker.running
    assert worker.stopping


def test_a_failing_round_is_logged_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    calls = threading.Semaphore(0)

    def work() -> None:
        calls.release()
        raise RuntimeError("storage down")

    worker = PeriodicWorker(work, lambda: 0.01, name="test-periodic", log=LOG, failure="poll failed; retry in %.2f s")
    with caplog.at_level(logging.ERROR, logger=LOG.name):
        worker.start()
        assert calls.acquire(timeout=5) and calls.acquire(timeout=5)
        worker.stop()
    assert "poll failed; retry in 0.01 s" in caplog.messages
    assert caplog.records[0].exc_info is not None


def test_stop_before_start_leaves_stopping_set_until_the_next_start() -> None:
    worker = PeriodicWorker(lambda: None, lambda: 60.0, name="test-periodic", log=LOG, failure="failed %.1f")
    worker.stop()
    assert worker.stopping
    worker.start()
    assert not worker.stopping
    worker.stop(timeout_s=5)
