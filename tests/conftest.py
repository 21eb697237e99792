"""Shared fixtures: a real embedded ClickHouse (chDB) per test session, one fresh database per test.

chDB runs one engine per process, so every test shares one data directory and isolates itself by
database name instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from cluster_kit import LAYOUTS, layout_database, layout_settings, open_engine

from collector.ingest import Ingestor
from query.service import QueryService
from storage.clickhouse import ClickHouse
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
    "tests/diagnosis/test_anomaly_faults.py",
    "tests/diagnosis/test_cpu_neighbour.py",
    "tests/hotspan/test_demo_incident.py",
    "tests/instrumented_stack/test_stack_faults.py",
    "tests/instrumented_stack/test_stack_sweep.py",
)
"""Tests whose goals are timings, or that load the whole host (a CPU-burning neighbour): marked ``alone``, which
``make test`` runs by themselves after the rest has run three files at a time (pytest-xdist)."""


EXIT_STATUS = pytest.StashKey[int]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[EXIT_STATUS] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave with pytest's status once everything is reported, before the interpreter tears down: chDB 4.4's
    engine can crash while it shuts down after some sequences of tests ("Exception in global_context->shutdown():
    The ShutdownTablesThreadPool is not initialized", then SIGSEGV), which would turn a green run red. Not in
    pytest-xdist workers, which still talk to the controller."""
    if hasattr(config, "workerinput") or EXIT_STATUS not in config.stash:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(config.stash[EXIT_STATUS])


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``-m alone`` (``make test``'s second phase) only the :data:`ALONE` test files are imported: the rest would
    be collected only to be deselected, which cost 15 s of imports."""
    if (
        config.getoption("markexpr") != "alone"
        or collection_path.is_dir()
        or not collection_path.name.startswith("test_")
    ):
        return None
    return not _is_alone(collection_path, config) or None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _is_alone(item.path, config):
            item.add_marker(pytest.mark.alone)


def _is_alone(path: Path, config: pytest.Config) -> bool:
    """Whether the test file ``path`` is one of :data:`ALONE`'s."""
    return path.relative_to(config.rootpath).as_posix().startswith(ALONE)


@pytest.fixture(scope="session")
def chdb_dsn(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The one embedded-engine DSN of this test process, opened with the two-shard cluster of
    ``tests/cluster_kit.py`` (which changes nothing for the stores of one node)."""
    return open_engine(tmp_path_factory.mktemp("chdb"))


BASE_LAYOUT = os.environ.get("HOTSPAN_TEST_LAYOUT", LAYOUTS[0])
"""The layout of every store a test does not ask both layouts of: one node, or the two-shard cluster with
``HOTSPAN_TEST_LAYOUT=cluster`` (a whole-suite run on the cluster layout, tests/README.md)."""
if BASE_LAYOUT not in LAYOUTS:
    raise pytest.UsageError(f"HOTSPAN_TEST_LAYOUT must be one of {', '.join(LAYOUTS)}, not {BASE_LAYOUT!r}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked ``both_layouts`` run once per table layout (``layout``: one node, and the two-shard cluster
    of ``tests/cluster_kit.py``), module-scoped so a module's shared server or store is built once per layout.

    The mark goes on a few representative tests (CI time), so the other tests of such a module are parametrized
    too, with :data:`BASE_LAYOUT` only: a module-scoped fixture built for an unparametrized ``layout`` would
    otherwise be reused, unchanged, by the cluster runs (pytest caches it regardless of its dependency's param).
    """
    chosen = any("layout" in mark.args[0] for mark in metafunc.definition.iter_markers("parametrize"))
    if "layout" not in metafunc.fixturenames or chosen:
        return
    if metafunc.definition.get_closest_marker("both_layouts"):
        metafunc.parametrize("layout", LAYOUTS, scope="module")
    elif _marks_some_test(metafunc.module):
        metafunc.parametrize("layout", [BASE_LAYOUT], scope="module")


def _marks_some_test(module: object) -> bool:
    """Whether a test function of ``module`` carries the ``both_layouts`` mark."""
    return any(
        mark.name == "both_layouts"
        for name, value in vars(module).items()
        if name.startswith("test_")
        for mark in getattr(value, "pytestmark", ())
    )


@pytest.fixture(scope="module")
def layout() -> str:
    """The table layout of the test's stores: :data:`BASE_LAYOUT`, unless the test is marked ``both_layouts``."""
    return BASE_LAYOUT


@pytest.fixture
def store(chdb_dsn: str, layout: str) -> Iterator[ClickHouse]:
    """A migrated, empty database of its own on the session's embedded engine, of the test's ``layout``."""
    with layout_database(chdb_dsn, layout) as ch:
        yield ch


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
def hotspan_server(chdb_dsn: str, tmp_path: Path, layout: str) -> Iterator[RunningServer]:
    """A served Hotspan (OTLP/HTTP + REST + UI and OTLP/gRPC) on free loopback ports, own database of the test's
    ``layout``."""
    with layout_settings(chdb_dsn, layout, "s") as where:
        server = serve_in_process(chdb_dsn, tmp_path, **where)
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
