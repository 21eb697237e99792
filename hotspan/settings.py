"""Service settings. Precedence: explicit argument > environment variable > default.

Environment variables (all optional), with defaults and units:

- ``HOTSPAN_DATA_DIR``: data directory (spool, embedded ClickHouse); path, default ``./.hotspan``.
- ``HOTSPAN_CLICKHOUSE_DSN``: ``chdb:///path`` (embedded) or ``http(s)://user:pass@host:8123``;
  default ``chdb://<data dir>/clickhouse``.
- ``HOTSPAN_CLICKHOUSE_DATABASE``: database holding ``otel_traces``; default ``otel`` (the exporter's).
- ``HOTSPAN_HOST``: bind address; default ``127.0.0.1``.
- ``HOTSPAN_HTTP_PORT``: OTLP/HTTP, REST API and UI; default 4318, 0 picks a free port.
- ``HOTSPAN_GRPC_PORT``: OTLP/gRPC; default 4317, 0 picks a free port, -1 disables.
- ``HOTSPAN_MAX_BODY_BYTES``: largest OTLP request body, compressed or inflated; bytes, default 16 MiB.
- ``HOTSPAN_TTL_DAYS``: drop partitions older than this; days, default 0 (keep forever).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

ENVIRONMENT = {
    "data_dir": "HOTSPAN_DATA_DIR",
    "clickhouse_dsn": "HOTSPAN_CLICKHOUSE_DSN",
    "clickhouse_database": "HOTSPAN_CLICKHOUSE_DATABASE",
    "host": "HOTSPAN_HOST",
    "http_port": "HOTSPAN_HTTP_PORT",
    "grpc_port": "HOTSPAN_GRPC_PORT",
    "max_body_bytes": "HOTSPAN_MAX_BODY_BYTES",
    "ttl_days": "HOTSPAN_TTL_DAYS",
}
"""Setting name → environment variable."""


class SettingsError(ValueError):
    """Invalid settings; the message lists every bad key at once."""


class Settings(BaseModel):
    """Validated settings of one Hotspan process."""

    data_dir: Path = Path(".hotspan")
    clickhouse_dsn: str = ""
    clickhouse_database: str = Field("otel", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    host: str = "127.0.0.1"
    http_port: int = Field(4318, ge=0, le=65535)
    grpc_port: int = Field(4317, ge=-1, le=65535)
    max_body_bytes: int = Field(16 * 1024 * 1024, ge=1024)
    ttl_days: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _default_dsn(self) -> Settings:
        if not self.clickhouse_dsn:
            self.clickhouse_dsn = f"chdb://{(self.data_dir / 'clickhouse').resolve()}"
        elif not self.clickhouse_dsn.startswith(("chdb:", "http://", "https://")):
            raise ValueError("clickhouse_dsn must start with chdb:, http:// or https://")
        return self


def load_settings(**overrides: Any) -> Settings:
    """Settings from ``overrides`` (``None`` values ignored), then the environment, then defaults.

    Raises:
        SettingsError: one or more values are invalid; each named by setting and variable.
    """
    values: dict[str, Any] = {
        name: os.environ[variable] for name, variable in ENVIRONMENT.items() if os.environ.get(variable)
    }
    values.update({name: value for name, value in overrides.items() if value is not None})
    try:
        return Settings(**values)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            name = ".".join(str(p) for p in err["loc"]) or "settings"
            variable = ENVIRONMENT.get(str(err["loc"][0]), "-") if err["loc"] else "-"
            problems.append(f"{name} ({variable}): {err['msg']}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from exc
