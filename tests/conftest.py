"""Shared fixtures: a real embedded ClickHouse (chDB) per test session, one fresh database per test.

chDB runs one engine per process, so every test shares one data directory and isolates itself by
database name instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from collector.ingest import Ingestor
from query.service import QueryService
from storage.clickhouse import ClickHouse
from storage.migrations import apply_migrations
from storage.reader import ClickHouseTraceReader
from storage.writer import ClickHouseTraceWriter
from testkit import query_room, serve_in_process

if TYPE_CHECKING:
    from playwright.sync_api import Browser

    from hotspan.server import RunningServer


ALONE = (
    "tests/reliability/",
    "tests/collector/test_overload.py",
    "tests/diagnosis/test_diagnosis_faults.py",
    "tests/diagnosis/test_cpu_neighbour.py",
    "tests/instrumented_stack/test_stack_faults.py",
)
"""Tests whose goals are timings, or that load the whole host (a CPU-burning neighbour): marked ``alone``, which
``make test`` runs by themselves after the rest has run two files at a time (pytest-xdist)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.relative_to(config.rootpath).as_posix().startswith(ALONE):
            item.add_marker(pytest.mark.alone)


@pytest.fixture(scope="session")
def chdb_dsn(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The one embedded-engine DSN of this test process."""
    return f"chdb://{tmp_path_factory.mktemp('chdb')}"


@pytest.fixture
def store(chdb_dsn: str) -> Iterator[ClickHouse]:
    """A migrated, empty database of its own on the session's embedded engine."""
    ch = ClickHouse(chdb_dsn, f"t_{uuid.uuid4().hex[:12]}")
    apply_migrations(ch)
    yield ch
    ch.command(f"DROP DATABASE IF EXISTS {ch.database}")
    ch.close()


@pytest.fixture
def reader(store: ClickHouse) -> ClickHouseTraceReader:
    return ClickHouseTraceReader(store)


@pytest.fixture
def query(store: ClickHouse) -> QueryService:
    """The query room over ``store`` with Hotspan's defaults (``testkit.query_room``)."""
    return query_room(store)


@pytest.fixture
def ingestor(store: ClickHouse) -> Ingestor:
    return Ingestor(ClickHouseTraceWriter(store))


@pytest.fixture
def hotspan_server(chdb_dsn: str, tmp_path: Path) -> Iterator[RunningServer]:
    """A served Hotspan (OTLP/HTTP + REST + UI and OTLP/gRPC) on free loopback ports, own database."""
    server = serve_in_process(chdb_dsn, tmp_path)
    yield server
    server.stop()


@pytest.fixture
def browser() -> Iterator[Browser]:
    """Debian's Chromium driven by Playwright; a missing binary fails the test (``make test`` installs it)."""
    from playwright.sync_api import sync_playwright

    from browser_kit import CHROMIUM, CHROMIUM_ARGS

    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium) to run UI tests")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
