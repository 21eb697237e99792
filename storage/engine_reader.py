"""Reading engine configurations and what each achieved: the throughput-latency view's one read, from
``hotspan_engine_requests`` (SQL in :mod:`storage.engine_sql`). Times are ns since the Unix epoch; every read
takes a keyword-only ``tenant`` (:mod:`storage.tenancy`): a name reads that tenant's rows, ``None`` every tenant
(admin only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import polars as pl

from storage import engine_sql
from storage.clickhouse import ClickHouse
from storage.tenancy import tenant_parameters

EXAMPLES = 3
"""Example traces per point."""


@dataclass(frozen=True)
class EngineWindow:
    """A throughput-latency read.

    Attributes:
        start_ns, end_ns: the window (spans starting in it), ns since the Unix epoch.
        bucket_ns: bucket width, ns (> 0); buckets start at ``start_ns``.
        model: only this model (the engine's ``vllm.config.model``, else the span's model); ``None`` for all.
    """

    start_ns: int
    end_ns: int
    bucket_ns: int
    model: str | None = None


class EngineReader(Protocol):
    """Reads vLLM's requests (``llm_request`` spans) grouped by engine configuration. Thread-safe, blocking."""

    def engine_buckets(self, window: EngineWindow, *, tenant: str | None) -> pl.DataFrame:
        """One row per (engine configuration, bucket) with requests: the columns of
        :data:`storage.engine_sql.THROUGHPUT_LATENCY` (``e2e``/``ttft`` arrays aside), sorted by configuration
        then bucket; empty (same columns) when the window holds no ``llm_request`` span."""
        ...


class ClickHouseEngineReader:
    """:class:`EngineReader` over ``otel_traces`` in ClickHouse."""

    def __init__(self, ch: ClickHouse) -> None:
        self._ch = ch

    def engine_buckets(self, window: EngineWindow, *, tenant: str | None) -> pl.DataFrame:
        """See :meth:`EngineReader.engine_buckets`. Raises ``ValueError`` for ``bucket_ns`` <= 0 and what storage
        raises."""
        if window.bucket_ns <= 0:
            raise ValueError(f"bucket_ns must be > 0, got {window.bucket_ns}")
        parameters = {
            "start_ns": window.start_ns,
            "end_ns": window.end_ns,
            "bucket_ns": window.bucket_ns,
            "model": window.model or "",
            "examples": EXAMPLES,
            **tenant_parameters(tenant),
        }
        sql = engine_sql.DROPPED_TRACES + engine_sql.THROUGHPUT_LATENCY
        frame = pl.from_arrow(self._ch.query_arrow(sql, parameters))
        assert isinstance(frame, pl.DataFrame)
        return frame.drop("e2e", "ttft", strict=False)
