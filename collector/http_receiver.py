"""OTLP/HTTP receiver: ``POST /v1/traces`` with protobuf or JSON bodies (OTLP specification, OTLP/HTTP)."""

from __future__ import annotations

import asyncio
import math

from fastapi import APIRouter, Request, Response
from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from starlette.concurrency import run_in_threadpool

from collector.decode import JSON, PROTOBUF, PayloadError, check_body, decompress, media_type
from collector.metrics import IngestMetrics
from collector.pipeline import IngestPipeline, OverloadedError, QueueFullError
from collector.results import ExportResult
from storage.tenancy import tenancy_of

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
"""Largest accepted body, compressed or not (bytes)."""

_GRPC_CODE_BY_STATUS = {
    400: code_pb2.INVALID_ARGUMENT,
    413: code_pb2.INVALID_ARGUMENT,
    415: code_pb2.INVALID_ARGUMENT,
}


def build_router(
    pipeline: IngestPipeline, metrics: IngestMetrics, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
) -> APIRouter:
    """The ``/v1/traces`` route.

    Answers 200 with an ``ExportTraceServiceResponse`` once the request is in the fsynced spool
    (``partial_success`` filled when spans were rejected), 400 for an unreadable body,
    413 over ``max_body_bytes``, 415 for another media type or encoding, 429 while the ingest queue
    is full and 503 while storage fails and the spool is full, both with ``Retry-After`` (seconds)
    so OTLP exporters back off and retry. Error bodies are a ``google.rpc.Status`` in the request's
    encoding, as the OTLP specification asks (OTLP/HTTP, "Failures", "Throttling").
    """
    router = APIRouter(tags=["OTLP"])

    @router.post(
        "/v1/traces",
        operation_id="otlp_export_traces",
        summary="OTLP/HTTP trace export (protobuf or JSON, optionally gzip)",
        responses={
            400: {"description": "Body is not an ExportTraceServiceRequest (google.rpc.Status)"},
            413: {"description": "Body larger than the configured limit"},
            415: {"description": "Unsupported Content-Type or Content-Encoding"},
            429: {"description": "Ingest queue full; retry after Retry-After seconds"},
            503: {"description": "Storage unavailable and spool full; retry after Retry-After seconds"},
        },
    )
    async def export_traces(request: Request) -> Response:
        try:
            media = media_type(request.headers.get("content-type"))
        except PayloadError as exc:
            metrics.requests.labels("http", "invalid").inc()
            return _status_response(exc.status, str(exc), JSON)
        protocol = "http/protobuf" if media == PROTOBUF else "http/json"
        declared = request.headers.get("content-length", "")
        try:
            ticket = pipeline.admit(protocol, int(declared) if declared.isdigit() else 0)
        except OverloadedError as exc:
            metrics.requests.labels(protocol, _overload_outcome(exc)).inc()
            return _overloaded_response(exc, media)
        try:
            body = await _read_limited(request, max_body_bytes)
            raw = decompress(body, request.headers.get("content-encoding"), max_body_bytes)
            del body
            checked = await run_in_threadpool(check_body, raw, media)
            del raw
            pipeline.resize(ticket, len(checked.body), checked.spans)
        except PayloadError as exc:
            pipeline.release(ticket)
            metrics.requests.labels(protocol, "invalid").inc()
            return _status_response(exc.status, str(exc), media)
        except OverloadedError as exc:
            metrics.requests.labels(protocol, _overload_outcome(exc)).inc()
            return _overloaded_response(exc, media)
        except BaseException:
            pipeline.release(ticket)
            raise
        tenant = tenancy_of(request.scope).tenant
        try:
            result = await asyncio.wrap_future(pipeline.submit(ticket, checked.body, checked.result, tenant))
        except OverloadedError as exc:
            metrics.requests.labels(protocol, _overload_outcome(exc)).inc()
            return _overloaded_response(exc, media)
        metrics.requests.labels(protocol, "partial" if result.rejected else "ok").inc()
        return _export_response(result, media)

    return router


def _overload_outcome(exc: OverloadedError) -> str:
    return "throttled" if isinstance(exc, QueueFullError) else "unavailable"


def _overloaded_response(exc: OverloadedError, media: str) -> Response:
    code = code_pb2.RESOURCE_EXHAUSTED if isinstance(exc, QueueFullError) else code_pb2.UNAVAILABLE
    response = _status_response(exc.status, str(exc), media, code)
    response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
    return response


async def _read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise PayloadError(413, f"body of {declared} bytes exceeds the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadError(413, f"body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def export_response_message(result: ExportResult) -> ExportTraceServiceResponse:
    """The OTLP response for ``result``: empty on full success, ``partial_success`` otherwise."""
    response = ExportTraceServiceResponse()
    if result.rejected or result.error_message:
        response.partial_success.rejected_spans = result.rejected
        response.partial_success.error_message = result.error_message
    return response


def _export_response(result: ExportResult, media: str) -> Response:
    message = export_response_message(result)
    if media == PROTOBUF:
        return Response(message.SerializeToString(), media_type=PROTOBUF)
    return Response(json_format.MessageToJson(message, indent=None), media_type=JSON)


def _status_response(status: int, message: str, media: str, code: int | None = None) -> Response:
    rpc_status = status_pb2.Status(code=code or _GRPC_CODE_BY_STATUS.get(status, code_pb2.UNKNOWN), message=message)
    if media == PROTOBUF:
        return Response(rpc_status.SerializeToString(), status_code=status, media_type=PROTOBUF)
    return Response(json_format.MessageToJson(rpc_status, indent=None), status_code=status, media_type=JSON)
