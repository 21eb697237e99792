"""Request body → ``ExportTraceServiceRequest``: content type, compression and size rules of OTLP/HTTP."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.batch import DEFAULT_LIMITS, check_request
from collector.limits import SpanLimits
from collector.native_writer import native_check, native_shape
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


INFLATE_STEP = 1 << 20
"""Bytes inflated at a time: the unit in which :func:`decompress` reports growth."""


def decompress(
    body: bytes, content_encoding: str | None, max_bytes: int, on_growth: Callable[[int], None] | None = None
) -> bytes:
    """Undo ``Content-Encoding`` (identity or gzip) without letting a bomb grow past ``max_bytes``.

    A gzip body may hold several members one after the other (RFC 1952, 2.2; what ``cat a.gz b.gz`` makes, and
    Go's and the OTel Collector's readers accept): every member is inflated, in order. Blocking, CPU-bound.

    Args:
        on_growth: called with the size of every :data:`INFLATE_STEP` (or smaller last) piece inflated, before
            the next one is, so the caller can reserve memory for it; what it raises stops the inflation.

    Raises:
        PayloadError: 415 for another encoding, 400 for broken gzip or bytes after the last member, 413 when
            inflated past ``max_bytes``.
    """
    encoding = (content_encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding != "gzip":
        raise PayloadError(415, f"Content-Encoding must be gzip or identity, got {content_encoding!r}")
    pieces: list[bytes] = []
    size = 0
    pending = body
    members = 0
    while True:
        inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
        while not inflater.eof:
            try:
                piece = inflater.decompress(pending, min(INFLATE_STEP, max_bytes - size + 1))
            except zlib.error as exc:
                raise PayloadError(400, f"gzip member {members + 1} of the body is not valid gzip: {exc}") from exc
            if not piece and not inflater.eof and not inflater.unconsumed_tail:
                raise PayloadError(400, f"gzip member {members + 1} of the body is truncated")
            pending = inflater.unconsumed_tail
            size += len(piece)
            if size > max_bytes:
                raise PayloadError(413, f"decompressed body exceeds the limit of {max_bytes} bytes")
            if on_growth is not None and piece:
                on_growth(len(piece))
            pieces.append(piece)
        members += 1
        pending = inflater.unused_data
        if not pending:
            break
    return b"".join(pieces)


def decode_request(
    raw: bytes, media: str, max_spans: int | None = None
) -> tuple[ExportTraceServiceRequest, list[Rejection]]:
    """Parse an uncompressed body of media type ``media``.

    Args:
        max_spans: refuse a body holding more than this many spans, or more than this many ``resourceSpans``
            and ``scopeSpans`` entries together, before building anything per entry (:func:`check_shape`);
            None for no bound.

    Returns:
        The request, and spans an OTLP/JSON body held that could not be read at all.

    Raises:
        PayloadError: 400 naming what is wrong when the body is not an ExportTraceServiceRequest; 413 over
            ``max_spans``.
    """
    if media == PROTOBUF:
        if max_spans is not None:
            shape = native_shape(raw)
            if shape is not None:
                check_shape(shape[0] + shape[1], shape[2], max_spans)
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(raw)
        except (DecodeError, RecursionError) as exc:
            raise PayloadError(400, f"body is not a protobuf ExportTraceServiceRequest: {exc}") from exc
        return request, []
    try:
        body = parse_json_bytes(raw)
        if max_spans is not None:
            check_shape(*json_shape(body, max_spans), max_spans)
        return request_from_json(body)
    except JsonPayloadError as exc:
        raise PayloadError(400, str(exc)) from exc


DEFAULT_MAX_REQUEST_SPANS = 200_000
"""Default of :func:`check_body`'s bound (``HOTSPAN_MAX_REQUEST_SPANS``): with Hotspan's 16 MiB body limit a
request of ordinary spans (200 bytes or more each) holds fewer; what holds more is degenerate (millions of empty
resources from a 16 KiB gzip) and would cost seconds and gigabytes to decode in Python."""


def check_shape(entries: int, spans: int, max_spans: int) -> None:
    """Refuse a request of ``spans`` spans and ``entries`` ``resourceSpans`` + ``scopeSpans`` entries when either
    passes ``max_spans``.

    Raises:
        PayloadError: 413, saying what to do (send smaller requests).
    """
    if spans > max_spans or entries > max_spans:
        what = f"{spans} spans" if spans > max_spans else f"{entries} resourceSpans and scopeSpans entries"
        raise PayloadError(413, f"request holds {what}; at most {max_spans} per request: send smaller batches")


def json_shape(body: object, max_spans: int) -> tuple[int, int]:
    """``(resourceSpans + scopeSpans entries, spans)`` of a parsed OTLP/JSON body, counted until either passes
    ``max_spans`` (so at most that many entries are visited); entries of the wrong type count as one and are left
    to :func:`collector.otlp_json.request_from_json` to refuse."""
    entries = spans = 0
    resources = body.get("resourceSpans") if isinstance(body, dict) else None
    for resource in resources if isinstance(resources, list) else ():
        entries += 1
        scopes = resource.get("scopeSpans") if isinstance(resource, dict) else None
        for scope in scopes if isinstance(scopes, list) else ():
            entries += 1
            found = scope.get("spans") if isinstance(scope, dict) else None
            spans += len(found) if isinstance(found, list) else 0
            if entries > max_spans or spans > max_spans:
                return entries, spans
        if entries > max_spans:
            break
    return entries, spans


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


def check_body(
    raw: bytes, media: str, max_spans: int = DEFAULT_MAX_REQUEST_SPANS, limits: SpanLimits = DEFAULT_LIMITS
) -> CheckedRequest:
    """Decode an uncompressed body and apply the per-span rules (:func:`collector.batch.check_request`).

    A protobuf body the compiled scanner finds clean (:func:`collector.native_writer.native_check`:
    every span valid and unique, every resource named, nothing over ``limits``) is answered by it, without a
    protobuf parse; any other body is first sized (:func:`check_shape`), then costs one protobuf parse (or JSON
    decode) and a pass over the spans' IDs, times and attribute counts. Attribute values are not converted here
    (that happens at the insert) but for a span large enough that one may pass ``limits.max_value_chars``.
    Blocking, CPU-bound; bounded by ``max_spans`` whatever the body holds.

    Raises:
        PayloadError: 400 when the body is not an ExportTraceServiceRequest; 413 for more than ``max_spans``
            spans (or ``resourceSpans`` + ``scopeSpans`` entries).
    """
    if media == PROTOBUF:
        spans = native_check(raw, limits)
        if isinstance(spans, int):
            check_shape(0, spans, max_spans)
            return CheckedRequest(raw, spans, export_result(spans, [], []))
    request, rejections = decode_request(raw, media, max_spans)
    spans = sum(
        len(scope_spans.spans)
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
    )
    body = raw if media == PROTOBUF else request.SerializeToString()
    return CheckedRequest(body, spans, check_request(request, rejections, limits).result())
