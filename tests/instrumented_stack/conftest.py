"""Fixtures for the instrumented stack: in-memory span capture, loopback servers, shared stack runs.

Runs are expensive (five services start), so each distinct run happens once per session and is shared:
``stack_run`` (the demo path, ``run_stack``) and ``scenario``/``mooncake`` (closed-loop replays with a given
fault list, spans and the engine's ``/metrics`` kept; ``stack_scenarios``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi import FastAPI
from stack_scenarios import TOOL_MIX, ScenarioRun, run_scenario, scenario_config

from instrumented_stack.capture import InMemorySpans
from instrumented_stack.runner import run_stack
from instrumented_stack.serving import ThreadedServer, bind_loopback
from instrumented_stack.summary import RunSummary

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
    """The first Azure conversation rows through the whole stack, three users at once, alternating tenants
    ``tenant-a``/``tenant-b``, sample policy ``debug-high``, every intent."""
    return run_stack(
        None,
        requests=STACK_RUN_REQUESTS,
        concurrency=3,
        speed=stack_speed,
        tenants=("tenant-a", "tenant-b"),
        sample_policy="debug-high",
        span_processors=stack_spans,
        intent_mix={"chat": 1.0, "policy": 1.0, "catalogue": 1.0, "calculate": 1.0},
    )


@pytest.fixture(scope="session")
def scenario() -> Callable[..., ScenarioRun]:
    """``scenario(*faults)``: 12 Azure conversation rows with tool intents, six users; cached per faults."""
    runs: dict[tuple[str, ...], ScenarioRun] = {}

    def get(*faults: str) -> ScenarioRun:
        if faults not in runs:
            runs[faults] = run_scenario(scenario_config(faults), "azure-conv", rows=12, users=6, intent_mix=TOOL_MIX)
        return runs[faults]

    return get


@pytest.fixture(scope="session")
def mooncake() -> Callable[..., ScenarioRun]:
    """``mooncake(*faults)``: the first 6 Mooncake rows, two users, chat only; cached per faults."""
    runs: dict[tuple[str, ...], ScenarioRun] = {}

    def get(*faults: str) -> ScenarioRun:
        if faults not in runs:
            runs[faults] = run_scenario(scenario_config(faults), "mooncake", rows=6, users=2, intent_mix={"chat": 1.0})
        return runs[faults]

    return get
