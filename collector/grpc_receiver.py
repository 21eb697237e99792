"""OTLP/gRPC receiver: ``opentelemetry.proto.collector.trace.v1.TraceService/Export``."""

from __future__ import annotations

import logging
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from collector.http_receiver import DEFAULT_MAX_BODY_BYTES, export_response_message
from collector.ingest import Ingestor

log = logging.getLogger(__name__)


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    """Validates and stores each export like the HTTP receiver; storage failure → UNAVAILABLE (retryable)."""

    def __init__(self, ingestor: Ingestor) -> None:
        self._ingestor = ingestor

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        try:
            result = self._ingestor.export(request)
        except Exception as exc:
            log.warning("export failed: %s", exc)
            context.abort(grpc.StatusCode.UNAVAILABLE, f"storage unavailable: {exc}")
        return export_response_message(result)


def start_grpc_server(
    ingestor: Ingestor,
    host: str,
    port: int,
    max_message_bytes: int = DEFAULT_MAX_BODY_BYTES,
    workers: int = 8,
) -> tuple[grpc.Server, int]:
    """Start a gRPC server with the OTLP trace service; return it and the bound port (``port`` 0 picks one).

    Raises:
        RuntimeError: the address could not be bound.
    """
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="otlp-grpc"),
        options=[("grpc.max_receive_message_length", max_message_bytes)],
    )
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(ingestor), server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise RuntimeError(f"cannot bind OTLP/gRPC to {host}:{port}")
    server.start()
    return server, bound
