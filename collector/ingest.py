"""The receiver-independent ingest step: validate a decoded request and store its valid spans."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.batch import to_batch
from collector.rejections import Rejection, summarize
from storage.writer import TraceWriter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExportResult:
    """What an export stored and refused; ``error_message`` goes into OTLP ``partial_success``.

    Attributes:
        accepted: spans stored.
        rejected: spans refused, each listed in ``rejections``.
        error_message: empty when everything was stored cleanly; otherwise the reasons (a warning
            only, with ``rejected`` 0, when spans were stored with a note such as a missing service name).
    """

    accepted: int
    rejected: int
    error_message: str
    rejections: tuple[Rejection, ...] = ()


class Ingestor:
    """Turns decoded requests into stored rows; shared by OTLP/HTTP, OTLP/gRPC and ``hotspan import``.

    Thread-safe as long as the writer is. Blocking: call it from a worker thread in async code.
    """

    def __init__(self, writer: TraceWriter) -> None:
        self._writer = writer

    def export(self, request: ExportTraceServiceRequest, rejections: list[Rejection] | None = None) -> ExportResult:
        """Validate every span, store the valid ones in one batch, report the rest.

        Raises:
            Exception: whatever the writer raises when storage fails; nothing was stored then.
        """
        batch = to_batch(request, rejections)
        self._writer.write(batch.table)
        message = summarize(batch.rejections)
        if batch.warnings:
            message = "; ".join([message, *batch.warnings] if message else batch.warnings)
        if batch.rejections:
            log.info("rejected %d span(s): %s", len(batch.rejections), summarize(batch.rejections, 1))
        return ExportResult(batch.accepted, len(batch.rejections), message, tuple(batch.rejections))
