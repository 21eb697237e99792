"""One ClickHouse connection shared by the writer and the reader.

The DSN decides the engine: ``chdb:///abs/path`` (or ``chdb://memory``) runs ClickHouse in-process
through clickhouse-connect's chDB backend; ``http(s)://user:pass@host:8123`` talks to a server. The
calling code is the same for both.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any

import clickhouse_connect
import pyarrow as pa
from clickhouse_connect.driver.client import Client

from storage.identifiers import validate_identifier
from storage.layout import SINGLE_NODE, Layout


class StorageError(RuntimeError):
    """ClickHouse could not be reached or refused a statement."""


class ClickHouse:
    """A thread-safe handle on one ClickHouse database.

    chDB allows one engine per process and its client is not safe for concurrent use, so every call
    takes a lock; against a server the lock costs little next to the round trip.

    Args:
        dsn: ``chdb:///path``, ``chdb://memory`` or ``http(s)://...``.
        database: database to create (if missing) and use for every statement.
        layout: where the tables live (``storage.layout``): one node by default; on a cluster the database is
            created on every node (``ON CLUSTER``, when replicated) and every session gets the layout's settings.

    Raises:
        StorageError: the engine could not be opened or the database not created.
    """

    def __init__(self, dsn: str, database: str, layout: Layout = SINGLE_NODE) -> None:
        self.dsn = dsn
        self.database = validate_identifier(database)
        self.layout = layout
        self.is_embedded = dsn.startswith("chdb:")
        self._lock = threading.RLock()
        on_cluster = f" ON CLUSTER {layout.cluster}" if layout.clustered and layout.replicated else ""
        try:
            bootstrap = clickhouse_connect.get_client(dsn=dsn)
            # Checked first: on a cluster the CREATE waits for every node, which a handle opened while one is down
            # must not do when the database is there already.
            if not bootstrap.command(f"EXISTS DATABASE {self.database}"):
                bootstrap.command(f"CREATE DATABASE IF NOT EXISTS {self.database}{on_cluster}")
            bootstrap.close()
            self._client: Client = clickhouse_connect.get_client(
                dsn=dsn, database=self.database, settings=layout.session_settings
            )
        except Exception as exc:
            raise StorageError(f"cannot open ClickHouse at {_redact(dsn)}: {exc}") from exc

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> Any:
        """Run a statement that returns no rows (DDL, INSERT ... SELECT)."""
        with self._lock:
            return self._client.command(sql, parameters=dict(parameters or {}))

    def query_arrow(self, sql: str, parameters: Mapping[str, Any] | None = None) -> pa.Table:
        """Run a query with bound ``{name:Type}`` parameters and return an Arrow table."""
        with self._lock:
            return self._client.query_arrow(sql, parameters=dict(parameters or {}), use_strings=True)

    def query_rows(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Run a query with bound parameters and return its rows as tuples."""
        with self._lock:
            return self._client.query(sql, parameters=dict(parameters or {})).result_rows

    @cached_property
    def partition_limit(self) -> int:
        """The session's ``max_partitions_per_insert_block``: most partitions one INSERT block may touch (0: no
        limit; ClickHouse's default is 100). Read once per handle (blocking, one query); see
        :mod:`storage.partitions`."""
        return int(self.query_rows("SELECT getSetting('max_partitions_per_insert_block')")[0][0])

    def insert_arrow(self, table: str, data: pa.Table, dedup_token: str | None = None) -> None:
        """Insert an Arrow table whose column names match ``table``'s columns; one INSERT.

        Args:
            dedup_token: ClickHouse ``insert_deduplication_token``: repeating an insert with the same
                token and data is a no-op on tables that deduplicate (replicated ones, or MergeTree
                with ``non_replicated_deduplication_window``).
        """
        settings = {"insert_deduplication_token": dedup_token} if dedup_token else None
        with self._lock:
            self._client.insert_arrow(validate_identifier(table), data, settings=settings)

    def insert_raw(
        self, table: str, columns: Sequence[str], data: bytes, fmt: str, dedup_token: str | None = None
    ) -> None:
        """Insert rows already encoded in ClickHouse input format ``fmt`` (e.g. ``Native``) into the
        given ``columns`` of ``table``; one INSERT. The bytes go to the server as they are (over HTTP, or
        through a temporary file into the embedded engine).

        Args:
            dedup_token: as for :meth:`insert_arrow`.
        """
        settings = {"insert_deduplication_token": dedup_token} if dedup_token else None
        with self._lock:
            self._client.raw_insert(
                validate_identifier(table), column_names=list(columns), insert_block=data, settings=settings, fmt=fmt
            )

    def close(self) -> None:
        """Release the client; the embedded engine stays open for other clients of this process."""
        with self._lock:
            self._client.close()


def _redact(dsn: str) -> str:
    """Hide the password of a DSN for messages and logs."""
    return re.sub(r"(//[^:/@]+:)[^@]*@", r"\1***@", dsn)
