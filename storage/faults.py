"""Storage fault injection: a TEST HOOK, honoured only when explicitly configured.

No ClickHouse server recent enough for clickhouse-connect installs on the test machines, and the
embedded engine cannot be stopped, so outages are caused at the storage client boundary instead:
:class:`FaultInjectingClickHouse` wraps a :class:`~storage.clickhouse.ClickHouse` handle and, inside a
chosen window of time, raises exactly what clickhouse-connect raises when a server is unreachable
(``OperationalError``, after its HTTP retries) or when an insert fails (``DatabaseError`` carrying
the server's exception text).

Spec (setting ``fault_injection``, env ``HOTSPAN_FAULT_INJECTION``): comma-separated ``key=value``:

- ``insert_fail_for_s=S``: statements that insert into ``otel_traces`` fail with ``DatabaseError``
  for ``S`` seconds (reads and other tables keep working).
- ``unreachable_for_s=S``: every call fails with ``OperationalError`` for ``S`` seconds.
- ``insert_delay_s=S``: every insert into ``otel_traces`` waits ``S`` seconds first (a slow or
  overloaded server), outside any window: overload tests use it to make storage the bottleneck.
- ``refuse_span_name=NAME``: an insert into ``otel_traces`` of a batch holding a span named ``NAME`` fails with
  ``DatabaseError``, always, while every other insert succeeds: a span that passed every check and that the store
  refuses all the same (a poison span), for the dead-letter path of the ingest pipeline.
- ``start_after_s=S``: the window opens ``S`` seconds after the handle is created (default 0).
- ``crash_after_insert=1``: the process kills itself (SIGKILL) right after its first insert into
  ``otel_traces`` succeeds: for the ingest pipeline, after spooled spans are inserted and before their
  spool segments are deleted, the worst moment for a crash, used to prove that inserting from the
  spool again after a restart stores nothing twice.

Nothing outside this module calls these hooks: a process gets them only by opening its handles
through :class:`FaultInjectingClickHouse` (``hotspan.app`` does when the setting is given).
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

from storage import trace_sql
from storage.clickhouse import ClickHouse

_INSERT_INTO_TRACES = re.compile(r"^\s*INSERT\s+INTO\s+`?otel_traces`?[\s(]", re.IGNORECASE)


def _inserts_traces(sql: str | None, table: str | None) -> bool:
    """Whether a call (a statement, or an insert into ``table``) writes into ``otel_traces``."""
    return table == "otel_traces" or (sql is not None and _INSERT_INTO_TRACES.match(sql) is not None)


class FaultSpecError(ValueError):
    """A fault injection spec that cannot be parsed."""


@dataclass(frozen=True)
class FaultPlan:
    """What to break and when (see the module docstring for the spec)."""

    insert_fail_for_s: float = 0.0
    unreachable_for_s: float = 0.0
    insert_delay_s: float = 0.0
    start_after_s: float = 0.0
    crash_after_insert: bool = False
    refuse_span_name: str = ""

    @classmethod
    def parse(cls, spec: str) -> FaultPlan:
        """Parse ``key=value,...``.

        Raises:
            FaultSpecError: unknown key or a value that is not a number.
        """
        values: dict[str, Any] = {}
        for item in filter(None, (part.strip() for part in spec.split(","))):
            key, _, raw = item.partition("=")
            if key not in cls.__dataclass_fields__:
                raise FaultSpecError(f"unknown fault injection key {key!r} in {spec!r}")
            if key == "refuse_span_name":
                values[key] = raw
                continue
            try:
                number = float(raw)
            except ValueError:
                raise FaultSpecError(f"fault injection {key} needs a number, got {raw!r}") from None
            values[key] = bool(number) if key == "crash_after_insert" else number
        return cls(**values)

    def crash_now(self) -> None:
        """Kill this process at once (called after an insert when :attr:`crash_after_insert` is set)."""
        os.kill(os.getpid(), signal.SIGKILL)


class FaultInjectingClickHouse(ClickHouse):
    """A :class:`ClickHouse` handle that fails on purpose inside the plan's window (test hook).

    Same interface and thread-safety as the wrapped handle; outside the window every call is passed
    through unchanged.
    """

    def __init__(self, inner: ClickHouse, plan: FaultPlan) -> None:
        # Deliberately no super().__init__: the wrapped handle owns the connection.
        self.dsn = inner.dsn
        self.database = inner.database
        self.layout = inner.layout
        self.is_embedded = inner.is_embedded
        self._inner = inner
        self._plan = plan
        self._opened = time.monotonic()
        self._lock = threading.RLock()

    def _window(self, length_s: float) -> bool:
        elapsed = time.monotonic() - self._opened - self._plan.start_after_s
        return 0 <= elapsed < length_s

    def _after(self, sql: str | None, table: str | None = None) -> None:
        if self._plan.crash_after_insert and _inserts_traces(sql, table):
            self._plan.crash_now()

    def _before(self, sql: str | None, table: str | None = None) -> None:
        if self._window(self._plan.unreachable_for_s):
            url = "http://127.0.0.1:8123"
            raise OperationalError(
                f"Error HTTPConnectionPool(host='127.0.0.1', port=8123): Max retries exceeded with url: /"
                f" (Caused by NewConnectionError('Failed to establish a new connection: [Errno 111]"
                f" Connection refused')) executing HTTP request attempt 1 ({url})"
            )
        inserting = _inserts_traces(sql, table)
        if inserting and self._plan.insert_delay_s:
            time.sleep(self._plan.insert_delay_s)
        if inserting and self._plan.refuse_span_name and self._stages_refused_span():
            raise DatabaseError(
                f"Received ClickHouse exception, code: 1001, server response: Code: 1001. DB::Exception: injected"
                f" refusal of a span named {self._plan.refuse_span_name!r}. (STD_EXCEPTION)",
                code=1001,
                name="STD_EXCEPTION",
            )
        if inserting and self._window(self._plan.insert_fail_for_s):
            raise DatabaseError(
                "Received ClickHouse exception, code: 252, server response: Code: 252. DB::Exception:"
                " Too many parts (3001 with average size of 1.00 MiB) in table 'otel.otel_traces'."
                " Merges are processing significantly slower than inserts. (TOO_MANY_PARTS)"
                " (for url http://127.0.0.1:8123)",
                code=252,
                name="TOO_MANY_PARTS",
            )

    def _stages_refused_span(self) -> bool:
        """Whether the batch staged for the insert (``storage.writer.OnceWriter``'s temporary table) holds a span
        named :attr:`FaultPlan.refuse_span_name`."""
        sql = f"SELECT count() FROM {trace_sql.INCOMING} WHERE SpanName = {{name:String}}"
        return bool(self._inner.query_rows(sql, {"name": self._plan.refuse_span_name})[0][0])

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> Any:
        self._before(sql)
        result = self._inner.command(sql, parameters)
        self._after(sql)
        return result

    def query_arrow(self, sql: str, parameters: Mapping[str, Any] | None = None) -> pa.Table:
        self._before(sql)
        return self._inner.query_arrow(sql, parameters)

    def query_rows(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        self._before(sql)
        return self._inner.query_rows(sql, parameters)

    def insert_arrow(self, table: str, data: pa.Table, dedup_token: str | None = None) -> None:
        self._before(None, table)
        self._inner.insert_arrow(table, data, dedup_token)
        self._after(None, table)

    def insert_raw(
        self, table: str, columns: Sequence[str], data: bytes, fmt: str, dedup_token: str | None = None
    ) -> None:
        self._before(None, table)
        self._inner.insert_raw(table, columns, data, fmt, dedup_token)
        self._after(None, table)

    def close(self) -> None:
        self._inner.close()
