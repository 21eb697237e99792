"""Shared fixtures: a real embedded ClickHouse (chDB) per test session, one fresh database per test.

chDB runs one engine per process, so every test shares one data directory and isolates itself by
database name instead.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from collector.ingest import ExportResult, Ingestor
from collector.otlp_json import request_from_json
from storage.clickhouse import ClickHouse
from storage.migrations import apply_migrations
from storage.reader import ClickHouseTraceReader
from storage.writer import ClickHouseTraceWriter

if TYPE_CHECKING:
    from hotspan.server import RunningServer

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
TRACES = SHARED_DATA / "traces"


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
def ingestor(store: ClickHouse) -> Ingestor:
    return Ingestor(ClickHouseTraceWriter(store))


def ingest_otlp_json_file(ingestor: Ingestor, path: Path) -> list[ExportResult]:
    """Store an OTLP-JSON file (one object, or JSON lines) through the real decode path."""
    text = path.read_text(encoding="utf-8")
    bodies = (
        [json.loads(line) for line in text.splitlines() if line.strip()]
        if path.suffix == ".jsonl"
        else [json.loads(text)]
    )
    return [ingestor.export(*request_from_json(body)) for body in bodies]


@pytest.fixture
def hotspan_server(chdb_dsn: str, tmp_path: Path) -> Iterator[RunningServer]:
    """A served Hotspan (OTLP/HTTP + REST + UI and OTLP/gRPC) on free loopback ports, own database."""
    from hotspan.server import start_server
    from hotspan.settings import load_settings

    settings = load_settings(
        data_dir=tmp_path,
        clickhouse_dsn=chdb_dsn,
        clickhouse_database=f"s_{uuid.uuid4().hex[:12]}",
        http_port=0,
        grpc_port=0,
    )
    server = start_server(settings)
    yield server
    server.stop()
