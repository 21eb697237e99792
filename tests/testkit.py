"""Test helpers shared across the suite: where the shared data lives, loading OTLP-JSON files.

A plain module (not ``conftest``) so tests can import it by a name no other folder shares.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from collector.ingest import ExportResult, Ingestor
from collector.otlp_json import request_from_json
from storage.clickhouse import ClickHouse
from storage.migrations import apply_migrations

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
TRACES = SHARED_DATA / "traces"


def ingest_otlp_json_file(ingestor: Ingestor, path: Path) -> list[ExportResult]:
    """Store an OTLP-JSON file (one object, or JSON lines) through the real decode path."""
    text = path.read_text(encoding="utf-8")
    bodies = (
        [json.loads(line) for line in text.splitlines() if line.strip()]
        if path.suffix == ".jsonl"
        else [json.loads(text)]
    )
    return [ingestor.export(*request_from_json(body)) for body in bodies]


@contextmanager
def migrated_database(dsn: str, prefix: str) -> Iterator[ClickHouse]:
    """A migrated database of its own (``<prefix>_<random>``) on the engine at ``dsn``, dropped on exit: for a
    module whose tests share one database (migrations take seconds) and keep apart by tenant."""
    ch = ClickHouse(dsn, f"{prefix}_{uuid.uuid4().hex[:12]}")
    apply_migrations(ch)
    try:
        yield ch
    finally:
        ch.command(f"DROP DATABASE IF EXISTS {ch.database}")
        ch.close()
