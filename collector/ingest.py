"""The synchronous ingest step: validate a decoded request and store its valid spans.

:class:`ExportResult` and :func:`export_result` live in :mod:`collector.results` and are re-exported here.
"""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.batch import DEFAULT_LIMITS, to_batch
from collector.limits import SpanLimits
from collector.rejections import Rejection
from collector.results import ExportResult, export_result
from storage.schema import with_tenant
from storage.tenancy import DEFAULT_TENANT
from storage.writer import TraceWriter


class Ingestor:
    """Turns decoded requests into stored rows, synchronously; used by ``hotspan import`` and tests.

    The served receivers go through :class:`collector.ingest_pipeline.IngestPipeline` instead (bounded
    queue, batching, spool). Thread-safe as long as the writer is. Blocking: call it from a worker
    thread in async code.
    """

    def __init__(self, writer: TraceWriter, limits: SpanLimits = DEFAULT_LIMITS) -> None:
        self._writer = writer
        self._limits = limits

    def export(
        self,
        request: ExportTraceServiceRequest,
        rejections: list[Rejection] | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> ExportResult:
        """Validate every span, store the valid ones in one batch under ``tenant`` (``storage.tenancy``), report
        the rest.

        Raises:
            Exception: whatever the writer raises when storage fails; nothing was stored then.
        """
        batch = to_batch(request, rejections, self._limits)
        self._writer.write(with_tenant(batch.table, tenant))
        return export_result(batch.accepted, batch.rejections, batch.warnings)


__all__ = ["ExportResult", "Ingestor", "export_result"]
