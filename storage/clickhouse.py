"""One ClickHouse connection shared by the writer and the reader.

The DSN decides the engine: ``chdb:///abs/path`` (or ``chdb://memory``) runs ClickHouse in-process
through clickhouse-connect's chDB backend; ``http(s)://user:pass@host:8123`` talks to a server. The
calling code is the same for both.
"""

from __future__ import annotations

import copy
import fcntl
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlparse

import clickhouse_connect
import pyarrow as pa
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError, DatabaseError

from storage.identifiers import validate_identifier
from storage.layout import SINGLE_NODE, Layout


class StorageError(RuntimeError):
    """ClickHouse could not be reached or refused a statement."""


ReadLimit = Literal["time", "memory", "rows", "size"]
"""Which budget a read exceeded: its time, its memory, the rows it may return, or the size of its SQL."""

_LIMIT_CODES: dict[int, ReadLimit] = {
    159: "time",  # TIMEOUT_EXCEEDED (max_execution_time)
    241: "memory",  # MEMORY_LIMIT_EXCEEDED (max_memory_usage)
    158: "rows",  # TOO_MANY_ROWS (max_rows_to_read)
    396: "rows",  # TOO_MANY_ROWS_OR_BYTES (max_result_rows)
    167: "size",  # TOO_DEEP_AST
    168: "size",  # TOO_BIG_AST
    306: "size",  # TOO_DEEP_RECURSION
}
_CODE = re.compile(r"\bCode: (\d+)\b")


class ReadLimitError(StorageError):
    """ClickHouse stopped a statement at one of its budgets (:class:`ReadBudget`, ``max_result_rows``, the size of
    the SQL); ``limit`` says which."""

    def __init__(self, limit: ReadLimit, message: str) -> None:
        super().__init__(message)
        self.limit: ReadLimit = limit


@dataclass(frozen=True)
class ReadBudget:
    """What one read statement may cost: ``time_s`` seconds (ClickHouse ``max_execution_time``) and ``memory_bytes``
    bytes (``max_memory_usage``); 0 is no limit. A statement over either fails with :class:`ReadLimitError`."""

    time_s: float = 30.0
    memory_bytes: int = 2 * 1024**3

    def settings(self) -> dict[str, Any]:
        """The ClickHouse settings of this budget."""
        return {"max_execution_time": self.time_s, "max_memory_usage": self.memory_bytes}


def read_limit(exc: Exception) -> ReadLimitError | None:
    """The :class:`ReadLimitError` that ClickHouse error ``exc`` means, or None when it is another failure. The
    size of a statement is checked by the parser (``max_query_size``: a ``SYNTAX_ERROR`` naming it)."""
    text = str(exc)
    if "Max query size exceeded" in text:
        return ReadLimitError("size", "the query is larger than the store parses (max_query_size)")
    match = _CODE.search(text)
    limit = _LIMIT_CODES.get(int(match[1])) if match else None
    return ReadLimitError(limit, text.splitlines()[0][:300]) if limit else None


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
        self._settings: dict[str, Any] = {}
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

    def budgeted(self, budget: ReadBudget) -> ClickHouse:
        """A handle on the same connection (and lock) whose every :meth:`command` and query carries ``budget``'s
        settings: the query room reads through one, so no read outgrows it, while ingest and the trace pipeline
        keep their handles unbounded. Closing either closes both."""
        view = copy.copy(self)
        view._settings = {**self._settings, **budget.settings()}
        return view

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> Any:
        """Run a statement that returns no rows (DDL, INSERT ... SELECT).

        Raises:
            ReadLimitError: the statement exceeded a budget of this handle (:meth:`budgeted`).
        """
        with self._statement(bool(self._settings)):
            return self._client.command(sql, parameters=dict(parameters or {}), settings=self._settings or None)

    def query_arrow(
        self, sql: str, parameters: Mapping[str, Any] | None = None, settings: Mapping[str, Any] | None = None
    ) -> pa.Table:
        """Run a query with bound ``{name:Type}`` parameters and return an Arrow table; ``settings`` are ClickHouse
        settings of this query alone (over the handle's budget).

        Raises:
            ReadLimitError: the query exceeded a budget (the handle's, one of ``settings``, or the SQL's size).
        """
        every = {**self._settings, **(settings or {})}
        with self._statement(bool(every)):
            return self._client.query_arrow(
                with_settings(sql, every), parameters=dict(parameters or {}), use_strings=True
            )

    def query_rows(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Run a query with bound parameters and return its rows as tuples.

        Raises:
            ReadLimitError: as for :meth:`query_arrow`.
        """
        with self._statement(bool(self._settings)):
            answer = self._client.query(sql, parameters=dict(parameters or {}), settings=self._settings or None)
            return answer.result_rows

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
        with self._statement(budgeted=False):
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
        with self._statement(budgeted=False):
            self._client.raw_insert(
                validate_identifier(table), column_names=list(columns), insert_block=data, settings=settings, fmt=fmt
            )

    @contextmanager
    def _statement(self, budgeted: bool) -> Iterator[None]:
        """One statement on this handle: under its lock, a budget's error as :class:`ReadLimitError` when
        ``budgeted`` (:func:`_limits`), and after any failure on the embedded engine one throwaway statement. On chDB
        4.4 with clickhouse-connect 1.12 the statement after a failed one may get the failed one's partial output
        instead of its own, once: after an Arrow query a row read fails with ``UnicodeDecodeError`` and an Arrow read
        with ``ArrowInvalid``; after a command a row read fails with ``StreamFailureError``. A statement run in
        between takes it (``test_a_failed_statement_leaves_the_next_reads_whole``); its own failure is dropped, so
        the caller always gets the first statement's error."""
        with self._lock, _limits(budgeted):
            try:
                yield
            except DatabaseError:
                if self.is_embedded:
                    with suppress(ClickHouseError):
                        self._client.command("SELECT 1")
                raise

    def close(self) -> None:
        """Release the client; the embedded engine stays open for other clients of this process."""
        with self._lock:
            self._client.close()


def with_settings(sql: str, settings: Mapping[str, bool | int | float | str]) -> str:
    """``sql`` ending with a ``SETTINGS`` clause of ``settings`` (``sql`` itself when there are none): settings of
    this query alone, written into it rather than handed to the driver. clickhouse-connect's chDB backend applies
    the settings of an Arrow query with ``SET`` statements around it (a read of ``system.settings``, then one
    ``SET`` per setting before and one after: 1 + 2n engine calls more than the query, about 1 ms each, measured
    in benchmarks/README.md, "read_settings.py"); its own ``query`` appends the same clause. A clause
    after one the SQL ends with already is allowed; for a setting both name, the SQL's own value holds.

    Raises:
        ValueError: a setting's name is not a plain identifier.
    """
    if not settings:
        return sql
    clause = ", ".join(f"{validate_identifier(name)} = {_literal(value)}" for name, value in settings.items())
    return f"{sql}\nSETTINGS {clause}"


def _literal(value: bool | int | float | str) -> str:
    """A setting's value as a ClickHouse literal."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int | float):
        return repr(value)
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@contextmanager
def _limits(budgeted: bool) -> Iterator[None]:
    """Turns a ClickHouse error that means a budget was exceeded into :class:`ReadLimitError`, on a ``budgeted``
    call only: on the ingest and pipeline handles a memory or time limit of the server is a failed insert that their
    callers retry (``collector.ingest_pipeline`` catches ``ClickHouseError``), never a read refused."""
    try:
        yield
    except DatabaseError as exc:
        if budgeted and (limit := read_limit(exc)) is not None:
            raise limit from exc
        raise


def embedded_store_held(dsn: str) -> Path | None:
    """The directory of the embedded store ``dsn`` names (``chdb:///path``) when another engine holds it open,
    else None (a server DSN, an in-memory engine, a directory not made yet, or a free one).

    ClickHouse, chDB's included, takes an exclusive ``flock`` on ``<path>/status`` for as long as its engine is
    open; chDB's own failure to take it surfaces only as "Error initializing EmbeddedServer" (its reason goes to
    the process's stderr). The lock is tried and released at once. This process's own open engine holds it too
    (a test serving in-process): that is no other engine, told by this process having the file open elsewhere.
    """
    parsed = urlparse(dsn)
    if parsed.scheme != "chdb" or parsed.netloc:
        return None
    path = Path(unquote(parsed.path))
    try:
        status = os.open(path / "status", os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(status, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return None if _open_elsewhere_here(status) else path
    finally:
        os.close(status)
    return None


def _open_elsewhere_here(descriptor: int) -> bool:
    """Whether another descriptor of this process (Linux ``/proc/self/fd``) names the file ``descriptor`` does."""
    target = os.readlink(f"/proc/self/fd/{descriptor}")
    for name in os.listdir("/proc/self/fd"):
        with suppress(OSError):  # descriptors close while the directory is read
            if int(name) != descriptor and os.readlink(f"/proc/self/fd/{name}") == target:
                return True
    return False


def _redact(dsn: str) -> str:
    """Hide the password of a DSN for messages and logs."""
    return re.sub(r"(//[^:/@]+:)[^@]*@", r"\1***@", dsn)
