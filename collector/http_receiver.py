"""OTLP/HTTP receiver: ``POST /v1/traces`` with protobuf or JSON bodies (OTLP specification, OTLP/HTTP)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from starlette.concurrency import run_in_threadpool

from collector.decode import JSON, PROTOBUF, PayloadError, decode_request, decompress, media_type
from collector.ingest import ExportResult, Ingestor

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
"""Largest accepted body, compressed or not (bytes)."""

_GRPC_CODE_BY_STATUS = {
    400: code_pb2.INVALID_ARGUMENT,
    413: code_pb2.INVALID_ARGUMENT,
    415: code_pb2.INVALID_ARGUMENT,
}


def build_router(ingestor: Ingestor, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> APIRouter:
    """The ``/v1/traces`` route.

    Answers 200 with an ``ExportTraceServiceResponse`` (``partial_success`` filled when spans were
    rejected), 400 for an unreadable body, 413 over ``max_body_bytes``, 415 for another media type
    or encoding, 503 when storage fails (retryable); error bodies are a ``google.rpc.Status`` in the
    request's encoding, as the OTLP specification asks.
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
            503: {"description": "Storage unavailable; retry later (Retry-After)"},
        },
    )
    async def export_traces(request: Request) -> Response:
        try:
            media = media_type(request.headers.get("content-type"))
        except PayloadError as exc:
            return _status_response(exc.status, str(exc), JSON)
        try:
            body = await _read_limited(request, max_body_bytes)
            raw = decompress(body, request.headers.get("content-encoding"), max_body_bytes)
            decoded, rejections = await run_in_threadpool(decode_request, raw, media)
        except PayloadError as exc:
            return _status_response(exc.status, str(exc), media)
        try:
            result = await run_in_threadpool(ingestor.export, decoded, rejections)
        except Exception as exc:
            response = _status_response(503, f"storage unavailable: {exc}", media, code_pb2.UNAVAILABLE)
            response.headers["Retry-After"] = "5"
            return response
        return _export_response(result, media)

    return router


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
