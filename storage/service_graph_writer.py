"""Writing service-graph calls to ``hotspan_service_graph_edges`` (migration 0024); the per-minute rollup
``hotspan_service_graph_minutes`` follows by materialized view (0026)."""

from __future__ import annotations

from typing import Protocol

import polars as pl
import pyarrow as pa

from storage.clickhouse import ClickHouse
from storage.partitions import split_by_day

_TABLE_COLUMNS = {
    "tenant": "Tenant",
    "trace_id": "TraceId",
    "timestamp_ns": "Timestamp",
    "client": "Client",
    "server": "Server",
    "connection_type": "ConnectionType",
    "client_span_id": "ClientSpanId",
    "server_span_id": "ServerSpanId",
    "client_span_name": "ClientSpanName",
    "server_span_name": "ServerSpanName",
    "has_client_span": "HasClientSpan",
    "has_server_span": "HasServerSpan",
    "client_duration_ns": "ClientDuration",
    "server_duration_ns": "ServerDuration",
    "failed": "Failed",
}
"""Edge frame column → ``hotspan_service_graph_edges`` column, in the edge frame's column order."""

EDGE_COLUMNS = tuple(_TABLE_COLUMNS)
"""Columns of an edge frame, one row per call: ``tenant`` (the trace's, folded: never ``''``), ``trace_id``,
``timestamp_ns`` (Int64 ns since the epoch: the client span's start, or the server span's when there is no
client span), node names, ``connection_type`` (``plain``, ``database``, ``messaging``, ``virtual``), span IDs
and names of each side (empty for a side without a span), ``has_*_span`` (Boolean), durations (Int64 ns, 0 for
a side without a span), ``failed`` (Boolean)."""

_STRING_COLUMNS = (
    "trace_id",
    "client",
    "server",
    "connection_type",
    "client_span_id",
    "server_span_id",
    "client_span_name",
    "server_span_name",
)


class ServiceGraphWriter(Protocol):
    """Stores service-graph calls.

    Contract: durable on return (one INSERT: a frame is stored whole or not at all); raises on failure; an
    empty frame is a no-op; inserting the same frame again, or with the same token, is a no-op. Thread-safe.
    """

    def write(self, edges: pl.DataFrame, dedup_token: str | None = None) -> None:
        """Store ``edges`` (columns :data:`EDGE_COLUMNS`); a repeated ``dedup_token`` makes the write a no-op."""
        ...


class ClickHouseServiceGraphWriter:
    """:class:`ServiceGraphWriter` onto ``hotspan_service_graph_edges``."""

    table = "hotspan_service_graph_edges"

    def __init__(self, ch: ClickHouse) -> None:
        self._ch = ch

    def write(self, edges: pl.DataFrame, dedup_token: str | None = None) -> None:
        """Insert ``edges`` in one statement (one per group of days when they span more partitions than one insert
        may touch: :mod:`storage.partitions`); ``dedup_token`` is ClickHouse's ``insert_deduplication_token``
        (the table keeps the last 1000 insert blocks, migration 0024).

        Raises:
            polars.exceptions.ColumnNotFoundError: a column of :data:`EDGE_COLUMNS` is missing.
            clickhouse_connect.driver.exceptions.ClickHouseError: the insert failed.
        """
        if edges.height == 0:
            return
        parts = list(split_by_day(to_arrow(edges), "Timestamp", self._ch.partition_limit))
        for index, part in enumerate(parts):
            token = dedup_token and (dedup_token if len(parts) == 1 else f"{dedup_token}-{index}")
            self._ch.insert_arrow(self.table, part, dedup_token=token)


def to_arrow(edges: pl.DataFrame) -> pa.Table:
    """An edge frame as the Arrow table ``hotspan_service_graph_edges`` takes (its column names and types)."""
    frame = edges.select(
        pl.col("tenant").cast(pl.String),
        pl.col("timestamp_ns").cast(pl.Int64).cast(pl.Datetime("ns")),
        *(pl.col(name).cast(pl.String) for name in _STRING_COLUMNS),
        *(pl.col(name).cast(pl.UInt8) for name in ("has_client_span", "has_server_span")),
        *(pl.col(name).clip(lower_bound=0).cast(pl.UInt64) for name in ("client_duration_ns", "server_duration_ns")),
        pl.col("failed").cast(pl.UInt8),
    ).rename(_TABLE_COLUMNS)
    return frame.to_arrow()
