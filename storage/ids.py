"""Trace and span ID spellings, shared by ingest (validation) and queries (lookups).

Hotspan stores IDs as lowercase hex: 32 characters for a trace, 16 for a span. OTLP/JSON carries
them as hex (the OTLP spec) but some senders use base64 (protobuf's generic JSON mapping); 64-bit
trace IDs (Zipkin, older Jaeger) are left-padded with zeros to 128 bits.
"""

from __future__ import annotations

import base64
import binascii
import re

TRACE_ID_BYTES = 16
SPAN_ID_BYTES = 8
_HEX = re.compile(r"^[0-9a-fA-F]+$")


class IdError(ValueError):
    """An ID that is neither hex nor base64 of the right length, or all zeros."""


def id_bytes_from_text(text: str, size: int, *, allow_short_trace: bool = True) -> bytes:
    """Decode an ID written as hex (any case) or base64 into ``size`` bytes.

    A 16-hex-character (or 8-byte base64) trace ID is left-padded to 16 bytes when ``size`` is 16
    and ``allow_short_trace`` is set.

    Raises:
        IdError: the text is neither, or decodes to the wrong length.
    """
    raw: bytes | None = None
    if _HEX.match(text) and len(text) % 2 == 0:
        raw = bytes.fromhex(text)
    else:
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None:
        raise IdError(f"{text!r} is neither hex nor base64")
    try:
        return check_id_bytes(raw, size, allow_short_trace=allow_short_trace)
    except IdError as exc:
        if _HEX.match(text):
            raise
        # Not hex, so read as base64: say so, or a 32-character ID "of 24 bytes" reads as nonsense.
        raise IdError(f"{text!r} is not hex, and read as base64 it {exc}") from exc


def check_id_bytes(raw: bytes, size: int, *, allow_short_trace: bool = True) -> bytes:
    """Validate binary ID bytes (as protobuf carries them); pad a 64-bit trace ID.

    Raises:
        IdError: wrong length or all zeros (the OTLP spec calls an all-zero ID invalid).
    """
    if size == TRACE_ID_BYTES and allow_short_trace and len(raw) == SPAN_ID_BYTES:
        raw = bytes(SPAN_ID_BYTES) + raw
    if len(raw) != size:
        raise IdError(f"must be {size} bytes ({size * 2} hex characters), got {len(raw)} bytes")
    if not any(raw):
        raise IdError("must not be all zeros")
    return raw


def hex_id(text: object, digits: int) -> str:
    """``text``, 1 to ``digits`` hex digits of any case, as lowercase hex left-padded with zeros to ``digits``
    (how Jaeger's ``TraceIDFromString``/``SpanIDFromString`` read IDs printed without leading zeros).

    Raises:
        IdError: ``text`` is not a string of 1 to ``digits`` hex digits.
    """
    if not isinstance(text, str) or not _HEX.match(text) or len(text) > digits:
        raise IdError(f"{text!r} is not an ID of 1 to {digits} hex digits")
    return text.lower().rjust(digits, "0")


SHORT_TRACE_DIGITS = 8
"""Hex digits of a trace ID's short form (example links, page titles)."""
PADDING_64 = "0" * (SPAN_ID_BYTES * 2)
"""The upper half of a stored 64-bit trace ID (Zipkin, Jaeger): the zeros :func:`check_id_bytes` pads it with."""


def shown_trace_id(trace_id: str) -> str:
    """A stored trace ID (32 lowercase hex) as Jaeger's UI and Zipkin show it: a 64-bit ID (the upper half zero,
    the padding :func:`check_id_bytes` added) as its 16 hex digits, any other whole. Jaeger's ``TraceID.String``
    prints a zero ``High`` this way, so an ID reads the same here as in the tracer that made it."""
    padded = len(trace_id) == TRACE_ID_BYTES * 2 and trace_id.startswith(PADDING_64)
    return trace_id[len(PADDING_64) :] if padded else trace_id


def short_trace_id(trace_id: str, digits: int = SHORT_TRACE_DIGITS) -> str:
    """The first ``digits`` hex digits of :func:`shown_trace_id`: a 64-bit ID's significant digits, not its zero
    padding (which made every Zipkin and Jaeger import read ``00000000``). Kept a prefix of the shown ID rather
    than its last digits so a short ID pasted into the trace page still finds the trace as a prefix
    (``query.trace_view_cache.TraceViews.ids_starting``)."""
    return shown_trace_id(trace_id)[:digits]


def normalize_trace_id(text: str) -> str:
    """Canonical lowercase 32-hex trace ID from user input (hex of 16 or 32 chars, or base64).

    Raises:
        IdError: the text is not a valid trace ID.
    """
    return id_bytes_from_text(text.strip(), TRACE_ID_BYTES).hex()
