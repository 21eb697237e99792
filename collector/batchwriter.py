"""Storing batch files of framed requests: check, convert, insert in one statement.

A :class:`BatchWriter` works in two steps: :meth:`~BatchWriter.prepare` checks a batch and decides,
per request, what is stored and what is rejected and why (the same answer the receivers already
gave with :func:`collector.batch.check_request`; here it decides which rows to insert);
:meth:`~BatchWriter.store` then writes the accepted spans with the batch's deduplication token.
Three implementations:

- :class:`~collector.native_writer.NativeBatchWriter` (the pipeline's): a compiled scanner writes
  ClickHouse ``Native`` columns straight from the protobuf bytes of clean requests, the rest go through
  :func:`python_request`; any ClickHouse.
- :class:`SqlBatchWriter`: the conversion runs inside ClickHouse (:mod:`collector.sqlconvert`); no
  span passes through Python except the rare ones whose attribute values nest too deeply for SQL.
  Needs the engine to read the batch file (the embedded chDB engine).
- :class:`PythonBatchWriter`: :func:`collector.batch.to_batch` per request and an Arrow insert;
  works with any ClickHouse, and is the fallback when the SQL path cannot run.

All produce the same answers and the same rows (``tests/collector/test_sqlconvert.py``,
``tests/collector/test_native_rows.py``).
Blocking; one batch at a time per writer instance (each owns a staging table or buffer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pyarrow as pa
from clickhouse_connect.driver.exceptions import ClickHouseError
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.batch import to_batch, unnamed_service_warning
from collector.limits import SpanLimits
from collector.rejections import Position, Rejection, duplicate_reason
from collector.results import ExportResult, export_result
from collector.sqlconvert import SqlConversion
from collector.wire import read_batch
from storage.clickhouse import ClickHouse
from storage.schema import with_tenant

TRACES_TABLE = "otel_traces"


class UnreadableRequestError(ValueError):
    """A request of the batch is not a protobuf ExportTraceServiceRequest (answered with 400)."""


@dataclass
class PreparedBatch:
    """A checked batch, ready to store.

    Attributes:
        path: the batch file.
        results: the answer of each request, in batch order; a request that cannot be read at all
            has an :class:`UnreadableRequestError` instead.
        truncated: spans stored with something cut off by a limit.
        python_tables: rows the Python conversion produced (empty for the SQL path's common case).
        exclusions: for the SQL path, the file listing spans the in-database insert must skip (the
            writer's own, valid until its next :meth:`BatchWriter.prepare`).
        native_rows: for the native path, the ``Native`` blocks of its clean requests (columns
            :data:`collector.native_writer.COLUMNS`).
    """

    path: Path
    results: list[ExportResult | UnreadableRequestError]
    truncated: int = 0
    python_tables: list[pa.Table] = field(default_factory=list)
    exclusions: Path | None = None
    native_rows: bytes = b""

    @property
    def accepted(self) -> int:
        """Spans this batch stores."""
        return sum(r.accepted for r in self.results if isinstance(r, ExportResult))


class BatchWriter(Protocol):
    """Checks and stores batch files; see the module docstring."""

    def prepare(self, path: Path, pre_rejections: Sequence[Sequence[Rejection]]) -> PreparedBatch:
        """Check the batch file at ``path`` (``pre_rejections[i]``: what the decoder of request ``i``
        already refused, placeholders included).

        Raises:
            clickhouse_connect.driver.exceptions.ClickHouseError: the database failed.
        """
        ...

    def store(self, batch: PreparedBatch, dedup_token: str) -> None:
        """Insert the accepted spans; repeating it with the same token stores nothing twice.

        Raises:
            clickhouse_connect.driver.exceptions.ClickHouseError: the insert failed.
        """
        ...

    def discard(self) -> None:
        """Free what the last prepared batch holds (stored or given up)."""
        ...

    def reachable(self) -> bool:
        """Whether ClickHouse answers at all (tells an outage from a batch it cannot read)."""
        ...


def insert_python_rows(ch: ClickHouse, batch: PreparedBatch, dedup_token: str) -> None:
    # Their own token: the same batch's in-database insert uses the plain one.
    if batch.python_tables:
        ch.insert_arrow(TRACES_TABLE, pa.concat_tables(batch.python_tables), f"{dedup_token}-py")


def answers(ch: ClickHouse) -> bool:
    try:
        ch.query_rows("SELECT 1")
    except ClickHouseError:
        return False
    return True


def _python_tables(
    requests: Sequence[tuple[bytes, str]], wanted: dict[int, set[Position]], limits: SpanLimits
) -> list[pa.Table]:
    """Rows of the spans at ``wanted[request index]`` positions, by the Python conversion."""
    tables = []
    for index, positions in sorted(wanted.items()):
        body, tenant = requests[index]
        request = ExportTraceServiceRequest.FromString(body)
        for r_index, resource_spans in enumerate(request.resource_spans):
            for s_index, scope_spans in enumerate(resource_spans.scope_spans):
                keep = [span for p, span in enumerate(scope_spans.spans) if (r_index, s_index, p) in positions]
                del scope_spans.spans[:]
                scope_spans.spans.extend(keep)
        tables.append(with_tenant(to_batch(request, limits=limits).table, tenant))
    return tables


class SqlBatchWriter:
    """:class:`BatchWriter` converting inside ClickHouse.

    Args:
        ch: a handle of its own (calls on one handle are serialized).
        limits: per-span limits.
        stage_table: name of this writer's ``Memory`` staging table (created on first use).
        work_dir: where the writer keeps its exclusions file (one, rewritten per batch).
    """

    def __init__(self, ch: ClickHouse, limits: SpanLimits, stage_table: str, work_dir: Path) -> None:
        self._ch = ch
        self._limits = limits
        self._conversion = SqlConversion(limits)
        self._stage = stage_table
        self._exclusions = work_dir / f"{stage_table}.exclusions.tsv"
        self._staged = False

    def prepare(self, path: Path, pre_rejections: Sequence[Sequence[Rejection]]) -> PreparedBatch:
        if not self._staged:
            # Created on first use, not at construction: the collector starts while ClickHouse is down.
            self._ch.command(self._conversion.stage_table_sql(self._stage))
            self._staged = True
        self._ch.command(f"TRUNCATE TABLE {self._stage}")
        self._ch.command(self._conversion.stage_sql(path, self._stage))
        checks = self._conversion.parse_check(self._ch.query_rows(self._conversion.check_sql(self._stage)))
        results: list[ExportResult | UnreadableRequestError] = []
        excluded: list[str] = []
        python: dict[int, set[Position]] = {}
        truncated = 0
        for index, pre in enumerate(pre_rejections):
            check = checks[index]
            placeholders = {r.position for r in pre if r.position is not None}
            rejections = list(pre)
            dropped = set(placeholders)
            for position, reason in check.invalid:
                if position not in placeholders:
                    rejections.append(Rejection.at(position, reason))
                    dropped.add(position)
            for group in check.duplicates:
                for position in group[:-1]:
                    rejections.append(Rejection.at(position, duplicate_reason(group[-1])))
                    dropped.add(position)
            deep = set(check.python) - dropped
            if deep:
                python[index] = deep
            excluded += [f"{index}\t{r + 1}\t{s + 1}\t{p + 1}\n" for r, s, p in sorted(dropped | deep)]
            rejections.sort(key=lambda r: r.position or (-1, -1, -1))
            warnings = [unnamed_service_warning(r) for r in check.unnamed_resources]
            results.append(export_result(check.spans - len(dropped), rejections, warnings))
            truncated += check.truncated
        exclusions = self._exclusions
        exclusions.write_text("".join(excluded), encoding="ascii")
        tables = _python_tables(read_batch(path.read_bytes()), python, self._limits) if python else []
        return PreparedBatch(path, results, truncated, tables, exclusions)

    def store(self, batch: PreparedBatch, dedup_token: str) -> None:
        """Insert the staged rows (when :meth:`prepare` made the batch) and the Python-converted ones
        (also for batches from :func:`python_prepare`)."""
        if batch.exclusions is not None:
            self._ch.command(SqlConversion.insert_sql(self._stage, batch.exclusions, TRACES_TABLE, dedup_token))
        insert_python_rows(self._ch, batch, dedup_token)

    def discard(self) -> None:
        """Empty the staging table and hand the memory the conversion used back to the system (the
        embedded engine's allocator keeps it otherwise: hundreds of MB per batch of 20000 spans)."""
        if self._staged:
            self._ch.command(f"TRUNCATE TABLE {self._stage}")
            self._ch.command("SYSTEM JEMALLOC PURGE")

    def reachable(self) -> bool:
        return answers(self._ch)


class PythonBatchWriter:
    """:class:`BatchWriter` converting in Python (:func:`collector.batch.to_batch`); any ClickHouse."""

    def __init__(self, ch: ClickHouse, limits: SpanLimits) -> None:
        self._ch = ch
        self._limits = limits

    def prepare(self, path: Path, pre_rejections: Sequence[Sequence[Rejection]]) -> PreparedBatch:
        return python_prepare(path, pre_rejections, self._limits)

    def store(self, batch: PreparedBatch, dedup_token: str) -> None:
        insert_python_rows(self._ch, batch, dedup_token)

    def discard(self) -> None:
        """Nothing is held beyond the prepared batch itself."""

    def reachable(self) -> bool:
        return answers(self._ch)


def python_prepare(path: Path, pre_rejections: Sequence[Sequence[Rejection]], limits: SpanLimits) -> PreparedBatch:
    """Check and convert a batch file in Python (no database needed).

    Requests Python's protobuf runtime cannot read get an :class:`UnreadableRequestError`.
    """
    results: list[ExportResult | UnreadableRequestError] = []
    tables = []
    truncated = 0
    for (body, tenant), pre in zip(read_batch(path.read_bytes()), pre_rejections, strict=True):
        result, table, cut = python_request(body, tenant, pre, limits)
        results.append(result)
        truncated += cut
        if table is not None:
            tables.append(table)
    return PreparedBatch(path, results, truncated, tables)


def python_request(
    body: bytes, tenant: str, pre: Sequence[Rejection], limits: SpanLimits
) -> tuple[ExportResult | UnreadableRequestError, pa.Table | None, int]:
    """One serialized request through :func:`collector.batch.to_batch`.

    Returns:
        ``(answer, rows with Tenant or None when there are none, spans truncated)``; the answer is an
        :class:`UnreadableRequestError` when Python's protobuf runtime cannot read ``body``.

    Raises:
        ValueError: ``tenant`` is not a valid tenant name.
    """
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RecursionError) as exc:
        return UnreadableRequestError(f"body is not a protobuf ExportTraceServiceRequest: {exc}"), None, 0
    batch = to_batch(request, pre, limits)
    table = with_tenant(batch.table, tenant)
    result = export_result(batch.accepted, batch.rejections, batch.warnings)
    return result, (table if table.num_rows else None), batch.truncated
