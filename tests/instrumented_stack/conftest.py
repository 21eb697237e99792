"""Fixtures for the instrumented stack: in-memory span capture, loopback servers, one shared stack run."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi import FastAPI

from instrumented_stack.capture import InMemorySpans
from instrumented_stack.runner import RunSummary, run_stack
from instrumented_stack.serving import ThreadedServer, bind_loopback

STACK_RUN_REQUESTS = 6
STACK_RUN_SPEED = 50.0


@pytest.fixture
def in_memory_spans() -> InMemorySpans:
    """A fresh per-service in-memory span capture."""
    return InMemorySpans()


@pytest.fixture
def serve() -> Iterator[Callable[[FastAPI], str]]:
    """Serve apps on loopback for one test: ``url = serve(app)``; all stop (gracefully) at teardown."""
    servers: list[ThreadedServer] = []

    def start(app: FastAPI) -> str:
        server = ThreadedServer(app, bind_loopback(), name=f"test-{app.title}")
        servers.append(server)
        server.start()
        return server.url

    yield start
    for server in reversed(servers):
        server.stop()


@pytest.fixture(scope="session")
def stack_speed() -> float:
    """The engine speed-up of the shared run (modeled seconds / speed)."""
    return STACK_RUN_SPEED


@pytest.fixture(scope="session")
def stack_spans() -> InMemorySpans:
    """Spans of the shared run, per service."""
    return InMemorySpans()


@pytest.fixture(scope="session")
def stack_run(stack_spans: InMemorySpans, stack_speed: float) -> RunSummary:
    """The first Azure conversation rows through gateway -> agent -> engine, three users at once,
    alternating tenants ``tenant-a``/``tenant-b``, sample policy ``debug-high``."""
    return run_stack(
        None,
        requests=STACK_RUN_REQUESTS,
        concurrency=3,
        speed=stack_speed,
        tenants=("tenant-a", "tenant-b"),
        sample_policy="debug-high",
        span_processors=stack_spans,
    )
