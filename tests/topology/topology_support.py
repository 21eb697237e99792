"""Helpers for the topology tests: hand-built span frames, stores with the trace pipeline run over them, and the
client/server pairs of an OTLP-JSON file derived straight from the file."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import uvicorn
from fastapi import FastAPI

from collector.batch import to_batch
from collector.otlp_json import request_from_json
from hotspan.app import Storage, open_trace_pipeline, trace_processors
from processors.pipeline.config import TracePipelineConfig
from processors.pipeline.trace_metrics import TraceMetrics
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader
from storage.writer import ClickHouseTraceWriter
from units import NS_PER_MS as MS

T0 = 1_730_000_000_000_000_000
"""A span start (ns since the epoch, 2024-10-27)."""

SPAN_SCHEMA = {
    "trace_id": pl.String,
    "span_id": pl.String,
    "parent_span_id": pl.String,
    "name": pl.String,
    "service_name": pl.String,
    "kind": pl.String,
    "start_time_unix_nano": pl.Int64,
    "end_time_unix_nano": pl.Int64,
    "status_code": pl.String,
    "attributes": pl.Map(pl.String, pl.String),
}


def span(
    span_id: str,
    parent: str,
    service: str,
    kind: str,
    *,
    trace: str = "t1",
    start_ms: float = 0,
    duration_ms: float = 10,
    error: bool = False,
    name: str | None = None,
    **attributes: str,
) -> dict[str, Any]:
    """One span row; attribute keys use ``__`` for ``.`` (``db__system="postgresql"``)."""
    return {
        "trace_id": trace.ljust(32, "0"),
        "span_id": span_id.ljust(16, "0"),
        "parent_span_id": parent.ljust(16, "0") if parent else "",
        "name": name or f"{service} {kind.lower()} {span_id}",
        "service_name": service,
        "kind": kind,
        "start_time_unix_nano": T0 + round(start_ms * MS),
        "end_time_unix_nano": T0 + round((start_ms + duration_ms) * MS),
        "status_code": "Error" if error else "Unset",
        "attributes": {key.replace("__", "."): value for key, value in attributes.items()},
    }


def frame(*rows: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=SPAN_SCHEMA)


def storage_of(ch: ClickHouse) -> Storage:
    return Storage(ch, ClickHouseTraceReader(ch), ClickHouseTraceWriter(ch))


def run_pipeline(storage: Storage, metrics: TraceMetrics | None = None) -> int:
    """Analyse every stored trace now with Hotspan's processors; returns traces analysed for the first time."""
    pipeline = open_trace_pipeline(storage, TracePipelineConfig(trace_idle_s=0), trace_processors(storage, metrics))
    return pipeline.run_once(force=True).first_seen


def otlp_client_server_pairs(path: Path) -> tuple[set[str], set[tuple[str, str]]]:
    """``(services, edges)`` of an OTLP-JSON lines file read straight from the JSON: every service that sent a
    span, and every (client service, server service) where a SERVER/CONSUMER span's parent is a CLIENT/PRODUCER
    span of another service. Kinds are OTLP enum values: 2 server, 3 client, 4 producer, 5 consumer."""
    spans: dict[tuple[str, str], tuple[str, int, str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for resource_spans in json.loads(line)["resourceSpans"]:
            attributes = resource_spans["resource"]["attributes"]
            service = next(a["value"]["stringValue"] for a in attributes if a["key"] == "service.name")
            for scope_spans in resource_spans["scopeSpans"]:
                for item in scope_spans["spans"]:
                    key = (item["traceId"], item["spanId"])
                    spans[key] = (service, int(item.get("kind", 0)), item.get("parentSpanId", ""))
    edges = set()
    for (trace_id, _span_id), (service, kind, parent_id) in spans.items():
        parent = spans.get((trace_id, parent_id))
        if kind in (2, 5) and parent is not None and parent[1] in (3, 4) and parent[0] != service:
            edges.add((parent[0], service))
    return {service for service, _, _ in spans.values()}, edges


def demo_batch(path: Path) -> pa.Table:
    """A whole OTLP-JSON lines file as one span batch (one insert instead of one per line: faster, and every
    trace is complete when the pipeline first sees it)."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return pa.concat_tables(to_batch(*request_from_json(json.loads(line))).table for line in lines)


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a thread on a free loopback port (bound before start: no race); yields
    ``http://127.0.0.1:<port>``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    host, port = sock.getsockname()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
