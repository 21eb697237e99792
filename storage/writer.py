"""Writing span batches to ClickHouse, each span stored once.

A sender may export a span more than once: an OTLP exporter retries after a timeout while its first
request was stored after all, a collector replays its queue after a restart, someone imports the same
file twice, a span is exported again more complete. :class:`OnceWriter` stores every batch through a
check inside ClickHouse (``storage.trace_sql.CHECK_INCOMING``), so that

- a copy equal to one stored already, or to an earlier one in the batch (same
  :data:`~storage.trace_sql.IDENTITY`, same :data:`~storage.trace_sql.CONTENT`), is not stored again;
- the first copy of a span is stored with ``Version`` 0, and the rollups fed at insert (RED, migration 0032)
  count it;
- a later copy that differs (more attributes, an end, a status) is stored with a ``Version`` above every earlier
  one: readers take it (``storage.trace_sql``'s module docstring says how), the rollups do not count it again.

The check looks only at stored rows of the batch's trace IDs and its spans' exact starts, so its cost follows the
batch, not the store (``benchmarks/dedup.py`` measures it). Two writers must not store copies of one span at
once: the ingest pipeline stores its groups one at a time (``collector.ingest_pipeline``); rows an OpenTelemetry
Collector writes into the same table are not checked (they keep Version 0), which readers tolerate.

Why at insert and not ``ReplacingMergeTree``: the rollups that materialized views fill at insert (RED) see every
inserted row, and no merge takes a count back, so a re-sent span must not be inserted as a first copy at all; the
exporter's sorting key (service, name, start) does not hold the span ID, so the table would have to be rebuilt
with another key (an upgrade that copies every row: ``benchmarks/dedup.py`` (d)) and would still leave copies that
differ in name or start for the reads to select; and reads before merges need ``FINAL`` or the same latest-copy
selection either way. The table keeps the exporter's engine and key, and gains one column.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

from storage import trace_sql
from storage.clickhouse import ClickHouse
from storage.partitions import day_groups
from storage.schema import SPAN_SCHEMA, STORED_SCHEMA


class TraceWriter(Protocol):
    """Stores span batches.

    Contract: when :meth:`write` returns, the batch is durable in the store; it raises on failure. Each span is
    stored once: writing a batch again stores nothing new (:class:`OnceWriter`). An empty batch is a no-op.
    Thread-safe.
    """

    def write(self, batch: pa.Table) -> None:
        """Store ``batch``: a table with :data:`storage.schema.STORED_SCHEMA` (spans and their tenant), or
        :data:`storage.schema.SPAN_SCHEMA` (stored with ``Tenant`` empty: the default tenant)."""
        ...

    def write_rows(self, native: bytes, native_columns: Sequence[str], tables: Sequence[pa.Table] = ()) -> None:
        """Store ``native`` (ClickHouse ``Native`` blocks of ``native_columns``, a converter's rows) and ``tables``
        (as :meth:`write` takes them) together."""
        ...


@dataclass(frozen=True)
class StoreOutcome:
    """What one :meth:`OnceWriter.store` did with its rows.

    Attributes:
        stored: rows inserted into ``otel_traces``.
        repeated: rows not stored because an equal copy was stored already or came earlier in the batch.
        replaced: of ``stored``, later copies of spans stored before (``Version`` > 0).
    """

    stored: int
    repeated: int
    replaced: int


class _VersionClock:
    """Process-wide source of ``Version`` bases: nanoseconds of the wall clock, strictly above every base handed
    out before plus its row count, so a later store's copies always sort above an earlier store's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0

    def take(self, rows: int) -> int:
        with self._lock:
            base = max(time.time_ns(), self._next)
            self._next = base + rows + 1
            return base


_CLOCK = _VersionClock()


class OnceWriter:
    """Stores span rows in ``otel_traces`` so that each span is stored once (see the module docstring).

    Rows are first loaded into a temporary table of the handle's session; a check reading only their identities
    and content hashes says which to keep and with what ``Version``; one ``INSERT ... SELECT`` then moves those, or
    one per group of days when they span more partitions than one insert may touch (:mod:`storage.partitions`).
    Thread-safe (one store at a time per instance); blocking.

    Args:
        ch: a ClickHouse handle of its own (its session holds the temporary tables).
    """

    def __init__(self, ch: ClickHouse) -> None:
        self._ch = ch
        self._lock = threading.Lock()

    def store(
        self, native: bytes = b"", native_columns: Sequence[str] = (), tables: Sequence[pa.Table] = ()
    ) -> StoreOutcome:
        """Store ``native`` (ClickHouse ``Native`` blocks of ``native_columns``) and ``tables`` (Arrow,
        :data:`storage.schema.STORED_SCHEMA`, or :data:`storage.schema.SPAN_SCHEMA` for the default tenant) together,
        each span once.

        Raises:
            clickhouse_connect.driver.exceptions.ClickHouseError: a statement failed; the caller may simply try
                again: a span stored by an earlier statement of this store (rows spanning more days than one insert
                may touch) is then found stored and not stored twice.
        """
        rows = sum(table.num_rows for table in tables)
        if not native and not rows:
            return StoreOutcome(0, 0, 0)
        with self._lock:
            self._ch.command(trace_sql.CREATE_INCOMING)
            self._ch.command(trace_sql.EMPTY_INCOMING)
            if native:
                self._ch.insert_raw(trace_sql.INCOMING, native_columns, native, "Native")
            for table in tables:
                self._ch.insert_arrow(trace_sql.INCOMING, table)
            staged, days = (int(value) for value in self._ch.query_rows(trace_sql.STAGED)[0])
            kept = self._ch.query_rows(trace_sql.CHECK_INCOMING, {"version": _CLOCK.take(staged)})
            replaced = sum(1 for _, version in kept if version)
            for chosen in self._day_groups(days) if kept else ():
                if len(kept) == staged and not replaced:
                    self._ch.command(trace_sql.MOVE_ALL, {"days": chosen})
                else:
                    positions, versions = zip(*kept, strict=True)
                    parameters = {"positions": list(positions), "versions": list(versions), "days": chosen}
                    self._ch.command(trace_sql.MOVE_KEPT, parameters)
            self._ch.command(trace_sql.EMPTY_INCOMING)
        return StoreOutcome(len(kept), staged - len(kept), replaced)

    def _day_groups(self, days: int) -> list[list]:
        """The day groups of the staged rows (``days`` of them) to move one statement each (``[[]]``: all at once)."""
        limit = self._ch.partition_limit
        if not limit or days <= limit:
            return [[]]
        return day_groups([row[0] for row in self._ch.query_rows(trace_sql.STAGED_DAYS)], limit)


class ClickHouseTraceWriter:
    """:class:`TraceWriter` onto ``otel_traces`` through a :class:`OnceWriter`; the lookup table and the rollups
    follow by materialized view."""

    table = "otel_traces"

    def __init__(self, ch: ClickHouse) -> None:
        self._once = OnceWriter(ch)

    def write(self, batch: pa.Table) -> None:
        """Store ``batch``, each span once.

        Raises:
            ValueError: the batch has neither :data:`STORED_SCHEMA` nor :data:`SPAN_SCHEMA`.
            clickhouse_connect.driver.exceptions.ClickHouseError: the insert failed.
        """
        if batch.num_rows == 0:
            return
        if not (batch.schema.equals(STORED_SCHEMA) or batch.schema.equals(SPAN_SCHEMA)):
            raise ValueError(f"batch schema differs from otel_traces layout: {batch.schema}")
        self._once.store(tables=[batch])

    def write_rows(self, native: bytes, native_columns: Sequence[str], tables: Sequence[pa.Table] = ()) -> None:
        """Store a converter's ``native`` rows (``Native`` blocks of ``native_columns``) and Arrow ``tables``
        together, each span once.

        Raises:
            clickhouse_connect.driver.exceptions.ClickHouseError: the insert failed.
        """
        self._once.store(native, native_columns, tables)
