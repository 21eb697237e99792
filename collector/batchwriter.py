"""Storing batch files of framed requests: check, convert, insert.

A :class:`BatchWriter` works in two steps: :meth:`~BatchWriter.prepare` checks a batch and decides,
per request, what is stored and what is rejected and why (the same answer the receivers already
gave with :func:`collector.batch.check_request`; here it decides which rows to insert);
:meth:`~BatchWriter.store` then writes the accepted spans, each span once
(:class:`storage.writer.OnceWriter`). The implementation is :class:`~collector.native_writer.NativeBatchWriter`: a
compiled scanner writes ClickHouse ``Native`` columns straight from the protobuf bytes of clean requests, the rest
go through :func:`python_request` (:func:`collector.batch.to_batch`, the reference) as Arrow; any ClickHouse.
``tests/collector/test_native_rows.py`` holds both to the same answers and rows. Blocking; one batch at a time
per writer instance.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pyarrow as pa
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.batch import to_batch
from collector.limits import SpanLimits
from collector.rejections import Rejection
from collector.results import ExportResult, export_result
from storage.schema import with_tenant
from storage.writer import StoreOutcome


class UnreadableRequestError(ValueError):
    """A request of the batch is not a protobuf ExportTraceServiceRequest (answered with 400)."""


@dataclass
class PreparedBatch:
    """A checked batch, ready to store.

    Attributes:
        path: the batch file; None for requests converted alone (:class:`collector.ingest.Ingestor`).
        results: the answer of each request, in batch order; a request that cannot be read at all
            has an :class:`UnreadableRequestError` instead.
        truncated: spans stored with something cut off by a limit.
        python_tables: rows the Python conversion produced, with ``Tenant`` (empty in the common case).
        native_rows: the ``Native`` blocks of the clean requests (columns
            :data:`collector.native_writer.COLUMNS`).
        redacted: matches masked in the batch per redaction rule (``collector.redaction``).
    """

    path: Path | None
    results: list[ExportResult | UnreadableRequestError]
    truncated: int = 0
    python_tables: list[pa.Table] = field(default_factory=list)
    native_rows: bytes = b""
    redacted: Counter[str] = field(default_factory=Counter)

    @property
    def accepted(self) -> int:
        """Spans this batch stores."""
        return sum(r.accepted for r in self.results if isinstance(r, ExportResult))


class BatchWriter(Protocol):
    """Checks and stores batch files; see the module docstring."""

    def prepare(self, path: Path, pre_rejections: Sequence[Sequence[Rejection]]) -> PreparedBatch:
        """Check the batch file at ``path`` (``pre_rejections[i]``: what the decoder of request ``i``
        already refused, placeholders included). Needs no database.

        Raises:
            ValueError: a request's tenant is not a valid tenant name.
            collector.wire.WireError: the file is not a batch file.
        """
        ...

    def store(self, batch: PreparedBatch) -> StoreOutcome:
        """Insert the accepted spans, each span once (:class:`storage.writer.OnceWriter`): storing the same batch
        again, after a crash between the insert and the deletion of its spool segments, stores nothing.

        Raises:
            clickhouse_connect.driver.exceptions.ClickHouseError: the insert failed; nothing was stored.
        """
        ...


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
