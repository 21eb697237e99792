"""Helpers for the dashboard tests: hand-built span frames and the UI served on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import polars as pl
import uvicorn
from a2wsgi import WSGIMiddleware
from fastapi import FastAPI

from dashboards.app import build_dash_app
from storage.reader import TraceReader

T0_NS = 1_730_000_000_000_000_000
"""An epoch-ns trace start large enough that float conversion would lose ns (2024-10-27)."""

SPAN_SCHEMA = {
    "trace_id": pl.String,
    "span_id": pl.String,
    "parent_span_id": pl.String,
    "name": pl.String,
    "service_name": pl.String,
    "kind": pl.String,
    "start_time_unix_nano": pl.Int64,
    "end_time_unix_nano": pl.Int64,
    "duration_ns": pl.UInt64,
    "status_code": pl.String,
    "status_message": pl.String,
    "attributes": pl.Map(pl.String, pl.String),
}


def spans_frame(
    rows: list[tuple[str, str, int, int]], *, service: str = "svc", trace_id: str = "ab" * 16
) -> pl.DataFrame:
    """A span frame shaped like ``TraceReader.trace``'s from ``(span_id, parent_id, start offset ns,
    duration ns)`` rows; names are ``op-<span_id>``, services alternate ``svc-a``/``svc-b`` unless one is
    given, and every span carries one attribute."""
    services = [service if service != "svc" else ("svc-a", "svc-b")[i % 2] for i in range(len(rows))]
    return pl.DataFrame(
        {
            "trace_id": [trace_id] * len(rows),
            "span_id": [r[0] for r in rows],
            "parent_span_id": [r[1] for r in rows],
            "name": [f"op-{r[0]}" for r in rows],
            "service_name": services,
            "kind": ["Internal"] * len(rows),
            "start_time_unix_nano": [T0_NS + r[2] for r in rows],
            "end_time_unix_nano": [min(T0_NS + r[2] + r[3], 2**63 - 1) for r in rows],
            "duration_ns": [r[3] for r in rows],
            "status_code": ["Unset"] * len(rows),
            "status_message": [""] * len(rows),
            "attributes": [{"index": str(i)} for i in range(len(rows))],
        },
        schema=SPAN_SCHEMA,
    )


def mounted_ui(reader: TraceReader) -> FastAPI:
    """A tiny FastAPI app with the Dash UI mounted at ``/ui`` the way ``hotspan.app`` mounts it."""
    api = FastAPI()
    api.mount("/ui", WSGIMiddleware(build_dash_app(reader).server))  # type: ignore[arg-type]
    return api


@contextmanager
def serving(app: FastAPI, start_timeout_s: float = 10.0) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a thread on a free loopback port; yields ``http://127.0.0.1:<port>``.

    The socket is bound before the server starts (port 0: the kernel picks a free port), so there is
    no race for the port. Waits at most ``start_timeout_s`` seconds for start-up.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    host, port = sock.getsockname()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="dash-ui-test", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + start_timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
