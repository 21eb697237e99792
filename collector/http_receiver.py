"""OTLP/HTTP receiver: ``POST /v1/traces`` with protobuf or JSON bodies (OTLP specification, OTLP/HTTP)."""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable

from fastapi import APIRouter, Request, Response
from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from starlette.requests import ClientDisconnect

from collector.decoder_pool import DecoderPool
from collector.ingest_pipeline import IngestPipeline, OverloadedError, QueueFullError, Ticket
from collector.metrics import IngestMetrics
from collector.otlp_body import (
    DEFAULT_MAX_REQUEST_SPANS,
    JSON,
    PROTOBUF,
    CheckedRequest,
    PayloadError,
    decompress,
    media_type,
)
from collector.results import ExportResult
from storage.tenancy import tenancy_of

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
"""Largest accepted body, compressed or not (bytes)."""

_GRPC_CODE_BY_STATUS = {
    400: code_pb2.INVALID_ARGUMENT,
    408: code_pb2.DEADLINE_EXCEEDED,
    413: code_pb2.INVALID_ARGUMENT,
    415: code_pb2.INVALID_ARGUMENT,
}


DEFAULT_BODY_READ_TIMEOUT_S = 30.0
"""Longest time to receive one request body (s): OTLP exporters give up on an export after 10 s by default, so
a body still arriving after this is a stalled or hostile sender."""

DEFAULT_DECODE_WAIT_S = 3.0
"""Longest time a received body waits for a decoder (s) before the sender is told 429: with the decode itself and
the spool it keeps answers well inside the OTLP exporters' 10 s default timeout, so overload is refused with a
retry hint instead of answered too late (which the exporter takes as a failure and sends again)."""

DEFAULT_DECODERS = max(2, os.cpu_count() or 2)
"""Bodies decoded at once (worker threads): decoding is CPU-bound and mostly holds the GIL, so more at once only
makes each answer later."""


def build_router(
    pipeline: IngestPipeline,
    metrics: IngestMetrics,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    *,
    body_read_timeout_s: float = DEFAULT_BODY_READ_TIMEOUT_S,
    max_request_spans: int = DEFAULT_MAX_REQUEST_SPANS,
    decode_wait_s: float = DEFAULT_DECODE_WAIT_S,
    decoders: int = DEFAULT_DECODERS,
) -> APIRouter:
    """The ``/v1/traces`` route.

    Answers 200 with an ``ExportTraceServiceResponse`` once the request is in the fsynced spool
    (``partial_success`` filled when spans were rejected), 400 for an unreadable body,
    408 for a body not received within ``body_read_timeout_s``, 413 over ``max_body_bytes`` (sent or
    inflated) or ``max_request_spans``, 415 for another media type or encoding, 429 while the ingest queue
    is full or a received body found no free decoder (``decoders`` of them) within ``decode_wait_s``, and 503
    while storage fails and the spool is full, both with ``Retry-After`` (seconds) so OTLP exporters back off
    and retry. Error bodies are a ``google.rpc.Status`` in the request's
    encoding, as the OTLP specification asks (OTLP/HTTP, "Failures", "Throttling").

    Queue room is taken for the bytes as they arrive and as they inflate, never for a declared
    ``Content-Length``: a sender that declares 16 MiB and sends one byte holds one byte. Decompression
    and decoding run on worker threads, off the event loop.
    """
    router = APIRouter(tags=["OTLP"])
    pool = DecoderPool(decoders, decode_wait_s, pipeline.retry_after_s)

    async def receive(request: Request, media: str, protocol: str) -> tuple[Ticket, CheckedRequest] | Response:
        """Reserve, read, inflate and check one body: the checked request and its reservation, or the answer that
        refuses it (the reservation released)."""
        try:
            ticket = pipeline.admit(protocol, 0)
        except OverloadedError as exc:
            metrics.requests.labels(protocol, _overload_outcome(exc)).inc()
            return _overloaded_response(exc, media, unread=True)
        encoding = request.headers.get("content-encoding")

        def decode(body: bytes) -> CheckedRequest:
            raw = decompress(body, encoding, max_body_bytes, lambda n: pipeline.grow(ticket, n))
            del body
            return pipeline.receive(ticket, raw, media, max_request_spans)

        try:
            async with asyncio.timeout(body_read_timeout_s):
                body = await _read_limited(request, max_body_bytes, lambda n: pipeline.grow(ticket, n))
            checked = await pool.run(decode, body)
            del body
        except PayloadError as exc:
            pipeline.release(ticket)
            metrics.requests.labels(protocol, "invalid").inc()
            return _status_response(exc.status, str(exc), media)
        except ClientDisconnect:
            # The sender went away mid-body: nothing to answer, nothing worth a traceback in the log.
            pipeline.release(ticket)
            metrics.requests.labels(protocol, "disconnected").inc()
            return Response(status_code=400)
        except TimeoutError:
            pipeline.release(ticket)
            metrics.requests.labels(protocol, "invalid").inc()
            return _status_response(408, f"request body not received within {body_read_timeout_s:g} s", media)
        except OverloadedError as exc:
            pipeline.release(ticket)
            metrics.requests.labels(protocol, _overload_outcome(exc)).inc()
            return _overloaded_response(exc, media)
        except BaseException:
            pipeline.release(ticket)
            raise
        return ticket, checked

    @router.post(
        "/v1/traces",
        operation_id="otlp_export_traces",
        summary="OTLP/HTTP trace export (protobuf or JSON, optionally gzip)",
        responses={
            400: {"description": "Body is not an ExportTraceServiceRequest (google.rpc.Status)"},
            408: {"description": "Body not received within the body read timeout"},
            413: {"description": "Body larger than the configured limit, or more spans than a request may hold"},
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
        if declared.isdigit() and int(declared) > max_body_bytes:
            metrics.requests.labels(protocol, "invalid").inc()
            return _status_response(413, f"body of {declared} bytes exceeds the limit of {max_body_bytes} bytes", media)
        try:
            pool.enter()
        except OverloadedError as exc:
            metrics.requests.labels(protocol, _overload_outcome(exc)).inc()
            return _overloaded_response(exc, media, unread=True)
        try:
            checked_or_answer = await receive(request, media, protocol)
        finally:
            pool.leave()
        if isinstance(checked_or_answer, Response):
            return checked_or_answer
        ticket, checked = checked_or_answer
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


def _overloaded_response(exc: OverloadedError, media: str, unread: bool = False) -> Response:
    """429/503 with ``Retry-After``; with ``unread`` (the body was not read) the connection is closed after the
    answer, so the server does not spend its time receiving a body it refused."""
    code = code_pb2.RESOURCE_EXHAUSTED if isinstance(exc, QueueFullError) else code_pb2.UNAVAILABLE
    response = _status_response(exc.status, str(exc), media, code)
    response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
    if unread:
        response.headers["Connection"] = "close"
    return response


async def _read_limited(request: Request, limit: int, on_chunk: Callable[[int], None]) -> bytes:
    """The request body, at most ``limit`` bytes; ``on_chunk`` is called with each chunk's size before it is kept.

    Raises:
        PayloadError: 413 past ``limit``.
    """
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadError(413, f"body exceeds the limit of {limit} bytes")
        on_chunk(len(chunk))
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
