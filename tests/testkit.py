"""Test helpers shared across the suite: where the shared data lives, loading OTLP-JSON files, serving Hotspan
in-process, calling Dash callbacks as a browser does.

A plain module (not ``conftest``) so tests can import it by a name no other folder shares.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from collector.ingest import ExportResult, Ingestor
from collector.otlp_json import request_from_json
from hotspan.importer import StoreSink, import_paths
from storage.clickhouse import ClickHouse
from storage.migrations import apply_migrations
from storage.reader import ClickHouseTraceReader, TraceCursor, TracePage, TraceQuery
from storage.tenancy import ALL_TENANTS
from storage.writer import ClickHouseTraceWriter

if TYPE_CHECKING:
    from hotspan.server import RunningServer
    from query.service import QueryService

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
TRACES = SHARED_DATA / "traces"


def fewest_events(store: ClickHouse, event: str, run: Callable[[], object], times: int = 3) -> int:
    """The fewest that ClickHouse's counter ``event`` (``system.events``, e.g. ``SelectedMarks``, ``Query``) grew over
    one call of ``run``, of ``times`` calls. The counter is the engine's, for the whole process: a thread another
    test of the same worker left running may add to it beside ``run``, never take away."""
    counted = []
    for _ in range(times):
        before = _event_count(store, event)
        run()
        counted.append(_event_count(store, event) - before)
    return min(counted)


def _event_count(store: ClickHouse, event: str) -> int:
    rows = store.query_rows("SELECT value FROM system.events WHERE event = {event:String}", {"event": event})
    return int(rows[0][0]) if rows else 0


def post_otlp_json_file(base_url: str, path: Path) -> None:
    """POST each line of the OTLP-JSON file ``path`` to ``base_url``'s ``/v1/traces``, asserting each is accepted."""
    import httpx

    for line in path.read_text().splitlines():
        if line.strip():
            answer = httpx.post(f"{base_url}/v1/traces", content=line, headers={"content-type": "application/json"})
            assert answer.status_code == 200, answer.text


def ingest_otlp_json_file(ingestor: Ingestor, path: Path) -> list[ExportResult]:
    """Store an OTLP-JSON file (one object, or JSON lines) through the real decode path, its lines in one batch as
    the served pipeline stores requests that arrive together (one insert; one per line took 0.1-0.3 s each)."""
    text = path.read_text(encoding="utf-8")
    bodies = (
        [json.loads(line) for line in text.splitlines() if line.strip()]
        if path.suffix == ".jsonl"
        else [json.loads(text)]
    )
    return ingestor.export_all([request_from_json(body) for body in bodies])


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


@contextmanager
def store_before(store: ClickHouse, version: int) -> Iterator[ClickHouse]:
    """``store``'s database made again with the migrations up to ``version`` only: a store written before the later
    ones, which the test then applies (``apply_migrations``). Closed when the block ends."""
    store.command(f"DROP DATABASE {store.database}")
    old = ClickHouse(store.dsn, store.database)
    try:
        apply_migrations(old, up_to=version)
        yield old
    finally:
        old.close()


def read_plan(store: ClickHouse, sql: str, parameters: dict[str, Any]) -> tuple[str, int, int]:
    """What ClickHouse plans to read for ``sql`` (a ``SELECT`` with bound ``parameters``), from ``EXPLAIN indexes =
    1``: the part it reads from (the table or a projection's name) and its last index step's granules, selected and
    of all."""
    plan = "\n".join(row[0] for row in store.query_rows(f"EXPLAIN indexes = 1 {sql}", parameters))
    source = re.search(r"ReadFromMergeTree \(([\w.]+)\)", plan)
    granules = re.findall(r"Granules: (\d+)/(\d+)", plan)
    assert source and granules, plan
    selected, total = granules[-1]
    return source[1], int(selected), int(total)


def serve_in_process(chdb_dsn: str, data_dir: Path, prefix: str = "s", **settings: Any) -> RunningServer:
    """A started in-process Hotspan (OTLP/HTTP + REST + UI and OTLP/gRPC) on free loopback ports, on the session's
    embedded engine with a database of its own (named ``<prefix>_<random>`` unless ``settings`` name one),
    ``settings`` overriding the rest. The caller stops it."""
    from hotspan.server import start_server
    from hotspan.settings import load_settings

    defaults = {"clickhouse_database": f"{prefix}_{uuid.uuid4().hex[:12]}", "http_port": 0, "grpc_port": 0}
    return start_server(load_settings(data_dir=data_dir, clickhouse_dsn=chdb_dsn, **(defaults | settings)))


def layout_ids(node: object) -> Iterator[object]:
    """Every component id in a Dash layout (as ``/ui/_dash-layout`` serves it)."""
    if isinstance(node, dict):
        if isinstance(node.get("props"), dict) and "id" in node["props"]:
            yield node["props"]["id"]
        for value in node.values():
            yield from layout_ids(value)
    elif isinstance(node, list):
        for item in node:
            yield from layout_ids(item)


def _output(part: str, ids: Sequence[object]) -> object:
    """The ``outputs`` entry of one ``id.property`` output of a callback; a pattern-matching id
    (``{"index": ["ALL"], "type": ...}``) stands for every matching component of the layout (``ids``)."""
    name, prop = part.rsplit(".", 1)
    if not name.startswith("{"):
        return {"id": name, "property": prop}
    fixed = {key: value for key, value in json.loads(name).items() if value != ["ALL"]}
    return [
        {"id": found, "property": prop}
        for found in ids
        if isinstance(found, dict) and all(found.get(key) == value for key, value in fixed.items())
    ]


def dash_update_body(dependency: dict[str, Any], values: dict[str, object], ids: Sequence[object] = ()) -> dict:
    """The ``/_dash-update-component`` request a browser sends to run the callback ``dependency`` (an entry of
    ``/ui/_dash-dependencies``) with ``values`` (``"id.property"`` → value; others None) as inputs and state."""

    def fill(items: list[dict]) -> list[dict]:
        return [dict(item, value=values.get(f"{item['id']}.{item['property']}")) for item in items]

    outputs = [_output(part, ids) for part in dependency["output"].strip(".").split("...")]
    return {
        "output": dependency["output"],
        "outputs": outputs if dependency["output"].startswith("..") else outputs[0],
        "inputs": fill(dependency["inputs"]),
        "state": fill(dependency["state"]),
        "changedPropIds": [f"{item['id']}.{item['property']}" for item in dependency["inputs"]],
    }


class CountingTraceReader(ClickHouseTraceReader):
    """The ClickHouse trace reader, counting the reads of traces' spans (:meth:`trace`, :meth:`trace_page`,
    :meth:`traces`) in :attr:`span_reads`: what a trace page load costs the store, seen from the store's side.
    Thread-safe."""

    def __init__(self, ch: ClickHouse) -> None:
        super().__init__(ch)
        self.span_reads = 0
        self._counting = threading.Lock()

    def _count(self) -> None:
        with self._counting:
            self.span_reads += 1

    def trace(self, trace_id: str, *, tenant: str | None) -> pl.DataFrame:
        self._count()
        return super().trace(trace_id, tenant=tenant)

    def trace_page(
        self, trace_id: str, *, tenant: str | None, after: TraceCursor | None = None, limit: int
    ) -> TracePage:
        self._count()
        return super().trace_page(trace_id, tenant=tenant, after=after, limit=limit)

    def traces(self, trace_ids: Sequence[str], *, tenant: str | None) -> pl.DataFrame:
        self._count()
        return super().traces(trace_ids, tenant=tenant)


def query_room(ch: ClickHouse) -> QueryService:
    """The query room over one migrated database with Hotspan's defaults (packaged stage, price and diagnosis
    tables; no engine metrics), as ``hotspan.app.open_query`` builds it from default settings. Its store is a
    :class:`CountingTraceReader`, so a test can tell how often a trace was read."""
    from analysis import STAGES
    from diagnosis import load_diagnosis_settings
    from processors.pipeline.config import TracePipelineConfig
    from query.service import QueryService
    from storage.analysis_store import ClickHouseAnalysisStore
    from storage.engine_reader import ClickHouseEngineReader
    from storage.incident_store import ClickHouseIncidentStore

    return QueryService.build(
        CountingTraceReader(ch),
        ClickHouseAnalysisStore(ch, STAGES),
        ClickHouseEngineReader(ch),
        TracePipelineConfig(),
        load_diagnosis_settings(),
        ClickHouseIncidentStore(ch),
    )


def import_first_trace(ch: ClickHouse, path: Path) -> pl.DataFrame:
    """Import the file at ``path`` through ``hotspan import``'s path (:func:`hotspan.importer.import_paths`) into
    ``ch`` and read back the first (by ID) of the traces it added, as the reader returns it; fails the test when
    the import rejects a span or adds no trace."""
    reader = ClickHouseTraceReader(ch)
    before = set(reader.search(TraceQuery(limit=1000), tenant=ALL_TENANTS)["trace_id"])
    summary = import_paths([path], StoreSink(ClickHouseTraceWriter(ch)), progress=False)
    assert summary.rejected == 0, summary.problems
    arrived = sorted(set(reader.search(TraceQuery(limit=1000), tenant=ALL_TENANTS)["trace_id"]) - before)
    assert arrived, f"{path}: no trace imported"
    return reader.trace(arrived[0], tenant=ALL_TENANTS)
