"""OTLP/gRPC receiver: ``opentelemetry.proto.collector.trace.v1.TraceService/Export``.

The method is registered without a request deserializer: the request arrives as the serialized
``ExportTraceServiceRequest``, is checked (:meth:`collector.ingest_pipeline.IngestPipeline.receive`) and spooled as
those same bytes (see :mod:`collector.ingest_pipeline`).

Status codes (OTLP specification, OTLP/gRPC "Failures" and "Throttling"): ``INVALID_ARGUMENT`` for a
request that cannot be read (not retryable); ``UNAVAILABLE`` with a ``google.rpc.RetryInfo`` trailer
when the queue is full or storage fails with a full spool (retryable, after the hinted delay).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent import futures

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo

from collector.http_receiver import DEFAULT_MAX_BODY_BYTES, export_response_message
from collector.ingest_pipeline import IngestPipeline, OverloadedError, QueueFullError
from collector.metrics import IngestMetrics
from collector.otlp_body import DEFAULT_MAX_REQUEST_SPANS, PROTOBUF, PayloadError
from storage.tenancy import INGEST_TENANT

log = logging.getLogger(__name__)

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
PROTOCOL = "grpc"


class TraceService:
    """The Export method over raw bytes; blocking (runs on the gRPC server's worker threads)."""

    def __init__(
        self, pipeline: IngestPipeline, metrics: IngestMetrics, max_request_spans: int = DEFAULT_MAX_REQUEST_SPANS
    ) -> None:
        self._pipeline = pipeline
        self._metrics = metrics
        self._max_request_spans = max_request_spans

    def export(self, body: bytes, context: grpc.ServicerContext) -> bytes:
        """Accept one serialized ``ExportTraceServiceRequest``; return the serialized response."""
        try:
            ticket = self._pipeline.admit(PROTOCOL, len(body))
        except OverloadedError as exc:
            self._abort_overloaded(context, exc)
        try:
            checked = self._pipeline.receive(ticket, body, PROTOBUF, self._max_request_spans)
        except PayloadError as exc:
            self._metrics.requests.labels(PROTOCOL, "invalid").inc()
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except OverloadedError as exc:
            self._abort_overloaded(context, exc)
        try:
            result = self._pipeline.submit(ticket, checked.body, checked.result, INGEST_TENANT.get()).result()
        except OverloadedError as exc:
            self._abort_overloaded(context, exc)
        self._metrics.requests.labels(PROTOCOL, "partial" if result.rejected else "ok").inc()
        return export_response_message(result).SerializeToString()

    def _abort_overloaded(self, context: grpc.ServicerContext, exc: OverloadedError) -> None:
        self._metrics.requests.labels(PROTOCOL, "throttled" if isinstance(exc, QueueFullError) else "unavailable").inc()
        seconds = int(exc.retry_after_s)
        delay = Duration(seconds=seconds, nanos=int((exc.retry_after_s - seconds) * 1e9))
        context.set_trailing_metadata([("google.rpc.retryinfo-bin", RetryInfo(retry_delay=delay).SerializeToString())])
        context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))


def start_grpc_server(
    pipeline: IngestPipeline,
    metrics: IngestMetrics,
    host: str,
    port: int,
    max_message_bytes: int = DEFAULT_MAX_BODY_BYTES,
    workers: int = 8,
    interceptors: Sequence[grpc.ServerInterceptor] = (),
    max_request_spans: int = DEFAULT_MAX_REQUEST_SPANS,
) -> tuple[grpc.Server, int]:
    """Start a gRPC server with the OTLP trace service; return it and the bound port (``port`` 0 picks one).

    ``interceptors`` run before every call, in order (``hotspan.auth``'s bearer-token check, which sets the
    call's tenant, :data:`storage.tenancy.INGEST_TENANT`).

    Raises:
        RuntimeError: the address could not be bound (in use by another process too: ``SO_REUSEPORT`` is off).
    """
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="otlp-grpc"),
        # gRPC sets SO_REUSEPORT by default: a second server on the same port then binds too and the kernel splits
        # the senders' connections between the two. Off, a clash fails here.
        options=[("grpc.max_receive_message_length", max_message_bytes), ("grpc.so_reuseport", 0)],
        interceptors=interceptors,
    )
    service = TraceService(pipeline, metrics, max_request_spans)
    # No request deserializer: the handler receives the serialized request bytes.
    handler = grpc.unary_unary_rpc_method_handler(service.export)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Export": handler}),))
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise RuntimeError(f"cannot bind OTLP/gRPC to {host}:{port}")
    server.start()
    return server, bound
