"""Test helpers shared across the suite: where the shared data lives, loading OTLP-JSON files.

A plain module (not ``conftest``) so tests can import it by a name no other folder shares.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collector.ingest import ExportResult, Ingestor
from collector.otlp_json import request_from_json

if TYPE_CHECKING:
    from hotspan.server import RunningServer

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


def serve_in_process(chdb_dsn: str, data_dir: Path, prefix: str = "s", **settings: Any) -> RunningServer:
    """A started in-process Hotspan (OTLP/HTTP + REST + UI and OTLP/gRPC) on free loopback ports, on the session's
    embedded engine with a database of its own (named ``<prefix>_<random>``), ``settings`` overriding the rest.
    The caller stops it."""
    from hotspan.server import start_server
    from hotspan.settings import load_settings

    return start_server(
        load_settings(
            data_dir=data_dir,
            clickhouse_dsn=chdb_dsn,
            clickhouse_database=f"{prefix}_{uuid.uuid4().hex[:12]}",
            http_port=0,
            grpc_port=0,
            **settings,
        )
    )
