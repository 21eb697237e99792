"""Writing span batches to ClickHouse."""

from __future__ import annotations

from typing import Protocol

import pyarrow as pa

from storage.clickhouse import ClickHouse
from storage.schema import SPAN_SCHEMA, STORED_SCHEMA


class TraceWriter(Protocol):
    """Stores span batches.

    Contract: when :meth:`write` returns, the batch is durable in the store (one INSERT, so a batch
    is stored whole or not at all); it raises on failure and stores nothing then. An empty batch is
    a no-op. Thread-safe.
    """

    def write(self, batch: pa.Table) -> None:
        """Store ``batch``: a table with :data:`storage.schema.STORED_SCHEMA` (spans and their tenant), or
        :data:`storage.schema.SPAN_SCHEMA` (stored with ``Tenant`` empty: the default tenant)."""
        ...


class ClickHouseTraceWriter:
    """:class:`TraceWriter` onto ``otel_traces``; the lookup table follows by materialized view."""

    table = "otel_traces"

    def __init__(self, ch: ClickHouse) -> None:
        self._ch = ch

    def write(self, batch: pa.Table) -> None:
        """Insert ``batch`` in one statement.

        Raises:
            ValueError: the batch has neither :data:`STORED_SCHEMA` nor :data:`SPAN_SCHEMA`.
            clickhouse_connect.driver.exceptions.ClickHouseError: the insert failed.
        """
        if batch.num_rows == 0:
            return
        if not (batch.schema.equals(STORED_SCHEMA) or batch.schema.equals(SPAN_SCHEMA)):
            raise ValueError(f"batch schema differs from otel_traces layout: {batch.schema}")
        self._ch.insert_arrow(self.table, batch)
