"""The synchronous ingest step: one decoded request converted as the served path converts it, and stored.

:class:`ExportResult` and :func:`export_result` live in :mod:`collector.results` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.batch import DEFAULT_LIMITS
from collector.batchwriter import UnreadableRequestError
from collector.limits import SpanLimits
from collector.native_writer import COLUMNS, RequestConverter
from collector.redaction import Redactor
from collector.rejections import Rejection
from collector.results import ExportResult, export_result
from storage.tenancy import DEFAULT_TENANT
from storage.writer import TraceWriter


class Ingestor:
    """Turns decoded requests into stored rows, synchronously, through the served path's conversion
    (:class:`collector.native_writer.RequestConverter`: redaction, the compiled scanner, the Python reference for
    what it does not handle) and store (:class:`storage.writer.OnceWriter`, each span once); the served receivers
    add the queue, spool and batching around the same two steps (:class:`collector.ingest_pipeline.IngestPipeline`).
    Thread-safe as long as the writer is. Blocking: call it from a worker thread in async code.

    Args:
        writer: where rows go.
        limits: per-span limits.
        redactor: masks message attributes before conversion (``HOTSPAN_REDACTION``); None: stored as received.
    """

    def __init__(
        self, writer: TraceWriter, limits: SpanLimits = DEFAULT_LIMITS, redactor: Redactor | None = None
    ) -> None:
        self._writer = writer
        self._converter = RequestConverter(limits, redactor)

    def export(
        self,
        request: ExportTraceServiceRequest,
        rejections: list[Rejection] | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> ExportResult:
        """Validate every span, store the valid ones in one batch under ``tenant`` (``storage.tenancy``), report
        the rest. ``rejections``: spans the decoder already refused (OTLP/JSON placeholders in ``request``).

        Raises:
            ValueError: ``tenant`` is not a valid tenant name, or ``request`` serialized cannot be read back
                (nesting past protobuf's limit; :class:`collector.batchwriter.UnreadableRequestError`).
            Exception: whatever the writer raises when storage fails; nothing was stored then.
        """
        return self.export_all([(request, rejections or [])], tenant)[0]

    def export_all(
        self, requests: Sequence[tuple[ExportTraceServiceRequest, Sequence[Rejection]]], tenant: str = DEFAULT_TENANT
    ) -> list[ExportResult]:
        """:meth:`export` for several requests (each with its decoder's rejections), stored in one batch as the
        served pipeline stores the requests of one spool group: the answers, in order, are each request's own.

        Raises:
            As :meth:`export`; nothing is stored when one request cannot be read back.
        """
        prepared = self._converter.convert(
            [(request.SerializeToString(), tenant) for request, _ in requests], [list(pre) for _, pre in requests]
        )
        results: list[ExportResult] = []
        for result in prepared.results:
            if isinstance(result, UnreadableRequestError):
                raise result
            results.append(result)
        self._writer.write_rows(prepared.native_rows, COLUMNS, prepared.python_tables)
        return results


__all__ = ["ExportResult", "Ingestor", "export_result"]
