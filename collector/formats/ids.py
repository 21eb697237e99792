"""Trace and span IDs from Jaeger and Zipkin files, normalised to OTLP-JSON hex.

Hotspan's convention (README.md, "Ingest rules"; ``storage.ids``): lowercase hex, 32 digits for a trace ID and 16
for a span ID, shorter IDs (64-bit Zipkin and Jaeger trace IDs, Jaeger IDs printed without leading zeros)
left-padded with zeros, as Jaeger's own `TraceIDFromString`/`SpanIDFromString` read them.
"""

from __future__ import annotations

import base64
import binascii

from collector.formats.payload import SpanError
from storage import ids

TRACE_ID_HEX_DIGITS = 32
SPAN_ID_HEX_DIGITS = 16


def hex_id(value: object, digits: int, field: str) -> str:
    """A hex ID of up to `digits` hex digits, left-padded with zeros to `digits` and lowercased
    (:func:`storage.ids.hex_id`).

    Raises SpanError naming `field` when `value` is not a string of 1..`digits` hex digits.
    """
    try:
        return ids.hex_id(value, digits)
    except ids.IdError as error:
        raise SpanError(f"{field} {error}") from None


def jaeger_model_id(value: object, digits: int, field: str) -> str:
    """An ID of the Jaeger domain model JSON (protobuf JSON: base64 of the 16 or 8 raw bytes) as hex.

    Hex is accepted too, because hand-written domain-model files use it; the two cannot be confused since
    base64 of 16 (8) bytes always ends in `==` (`=`), which is not a hex digit.
    Raises SpanError naming `field` when `value` is neither.
    """
    if isinstance(value, str) and value.endswith("="):
        try:
            raw = base64.b64decode(value, validate=True)
        except binascii.Error as exc:
            raise SpanError(f"{field} {value!r} is not valid base64: {exc}") from None
        if len(raw) != digits // 2:
            raise SpanError(f"{field} {value!r} decodes to {len(raw)} bytes, expected {digits // 2}")
        return raw.hex()
    return hex_id(value, digits, field)
