"""Assembly of one Hotspan process: storage, OTLP receivers, REST API and UI."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from a2wsgi import WSGIMiddleware
from fastapi import FastAPI
from fastapi.responses import RedirectResponse

from api import traces as traces_api
from api.errors import install_error_handlers
from api.jaeger import routes_v1 as jaeger_v1
from api.jaeger import routes_v3 as jaeger_v3
from api.models import Health
from collector import http_receiver
from collector.ingest import Ingestor
from dashboards.app import build_dash_app
from hotspan.settings import Settings
from storage.clickhouse import ClickHouse
from storage.migrations import apply_migrations
from storage.reader import ClickHouseTraceReader
from storage.writer import ClickHouseTraceWriter

log = logging.getLogger(__name__)


@dataclass
class Storage:
    """The opened store and its read and write sides."""

    clickhouse: ClickHouse
    reader: ClickHouseTraceReader
    writer: ClickHouseTraceWriter


def open_storage(settings: Settings) -> Storage:
    """Open ClickHouse per ``settings`` and apply pending migrations.

    Raises:
        storage.clickhouse.StorageError: the store cannot be opened.
    """
    if settings.clickhouse_dsn.startswith("chdb:"):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    ch = ClickHouse(settings.clickhouse_dsn, settings.clickhouse_database)
    applied = apply_migrations(ch, settings.ttl_days)
    if applied:
        log.info("applied migrations %s", applied)
    return Storage(ch, ClickHouseTraceReader(ch), ClickHouseTraceWriter(ch))


def create_app(settings: Settings, storage: Storage) -> FastAPI:
    """The HTTP application: ``/v1/traces``, ``/api/v1/...``, ``/healthz``, ``/docs`` and the UI at ``/ui``."""
    app = FastAPI(
        title="Hotspan",
        version="0.1.0",
        description="Trace analysis for LLM agent stacks. Times are ns unless a field name says otherwise.",
    )
    install_error_handlers(app)
    app.state.ingestor = Ingestor(storage.writer)
    app.include_router(http_receiver.build_router(app.state.ingestor, settings.max_body_bytes))
    app.include_router(traces_api.build_router(storage.reader))
    app.include_router(jaeger_v1.build_router(storage.reader))
    app.include_router(jaeger_v3.build_router(storage.reader))

    @app.get("/healthz", operation_id="health", response_model=Health, tags=["service"])
    def health() -> Health:
        """Liveness and storage reachability."""
        try:
            storage.clickhouse.query_rows("SELECT 1")
        except Exception as exc:
            return Health(status="degraded", storage=f"unavailable: {exc}")
        return Health(status="ok", storage="ok")

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui/")

    dash_app = build_dash_app(storage.reader, requests_pathname_prefix="/ui/")
    app.mount("/ui", WSGIMiddleware(dash_app.server))  # type: ignore[arg-type]
    return app
