"""Test helpers shared across the suite: where the shared data lives, loading OTLP-JSON files.

A plain module (not ``conftest``) so tests can import it by a name no other folder shares.
"""

from __future__ import annotations

import json
from pathlib import Path

from collector.ingest import ExportResult, Ingestor
from collector.otlp_json import request_from_json

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
