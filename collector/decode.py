"""Request body → ``ExportTraceServiceRequest``: content type, compression and size rules of OTLP/HTTP."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.batch import check_request
from collector.native_writer import native_check
from collector.otlp_json import JsonPayloadError, parse_json_bytes, request_from_json
from collector.rejections import Rejection
from collector.results import ExportResult, export_result

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class PayloadError(ValueError):
    """The body as a whole cannot be accepted.

    Attributes:
        status: the HTTP status to answer with (400 unreadable, 413 too large, 415 media type).
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def media_type(content_type: str | None) -> str:
    """The bare media type of a Content-Type header (``application/json; charset=utf-8`` → ``application/json``).

    Raises:
        PayloadError: 415 for anything but OTLP's protobuf and JSON encodings.
    """
    bare = (content_type or "").split(";", 1)[0].strip().lower()
    if bare not in (PROTOBUF, JSON):
        raise PayloadError(415, f"Content-Type must be {PROTOBUF} or {JSON}, got {content_type or 'none'!r}")
    return bare


def decompress(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    """Undo ``Content-Encoding`` (identity or gzip) without letting a bomb grow past ``max_bytes``.

    Raises:
        PayloadError: 415 for another encoding, 400 for broken gzip, 413 when inflated past ``max_bytes``.
    """
    encoding = (content_encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding != "gzip":
        raise PayloadError(415, f"Content-Encoding must be gzip or identity, got {content_encoding!r}")
    inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
    try:
        raw = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise PayloadError(400, f"body is not valid gzip: {exc}") from exc
    if len(raw) > max_bytes or inflater.unconsumed_tail:
        raise PayloadError(413, f"decompressed body exceeds the limit of {max_bytes} bytes")
    if not inflater.eof:
        raise PayloadError(400, "gzip body is truncated")
    return raw


def decode_request(raw: bytes, media: str) -> tuple[ExportTraceServiceRequest, list[Rejection]]:
    """Parse an uncompressed body of media type ``media``.

    Returns:
        The request, and spans an OTLP/JSON body held that could not be read at all.

    Raises:
        PayloadError: 400 naming what is wrong when the body is not an ExportTraceServiceRequest.
    """
    if media == PROTOBUF:
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(raw)
        except (DecodeError, RecursionError) as exc:
            raise PayloadError(400, f"body is not a protobuf ExportTraceServiceRequest: {exc}") from exc
        return request, []
    try:
        return request_from_json(parse_json_bytes(raw))
    except JsonPayloadError as exc:
        raise PayloadError(400, str(exc)) from exc


@dataclass(frozen=True)
class CheckedRequest:
    """A request body decoded and checked, ready for the ingest pipeline.

    Attributes:
        body: the serialized protobuf ``ExportTraceServiceRequest`` to store (an OTLP/JSON body
            re-encoded, its unreadable spans left as empty placeholders).
        spans: spans in the request, valid or not.
        result: the answer the sender gets once the request is durable.
    """

    body: bytes
    spans: int
    result: ExportResult


def check_body(raw: bytes, media: str) -> CheckedRequest:
    """Decode an uncompressed body and apply the per-span rules (:func:`collector.batch.check_request`).

    A protobuf body the compiled scanner finds clean (:func:`collector.native_writer.native_check`:
    every span valid and unique, every resource named) is answered by it, without a protobuf parse;
    any other body costs one protobuf parse (or JSON decode) and a pass over the spans' IDs and
    times. Attribute values are not converted here (that happens at the insert). Blocking, CPU-bound.

    Raises:
        PayloadError: 400 when the body is not an ExportTraceServiceRequest.
    """
    if media == PROTOBUF:
        spans = native_check(raw)
        if isinstance(spans, int):
            return CheckedRequest(raw, spans, export_result(spans, [], []))
    request, rejections = decode_request(raw, media)
    spans = sum(
        len(scope_spans.spans)
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
    )
    body = raw if media == PROTOBUF else request.SerializeToString()
    return CheckedRequest(body, spans, check_request(request, rejections).result())
