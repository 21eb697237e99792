"""Batch files (spool segments, insert groups): serialized ``ExportTraceServiceRequest`` messages, framed.

Each request is length-prefixed (varint) and followed by two fields of Hotspan's own, far above
any OTLP field number: its index in the file (:data:`REQUEST_INDEX_FIELD`) and its tenant
(:data:`TENANT_FIELD`). Appending a field to a serialized message sets that field (messages
concatenate), so the request bytes are never decoded or re-encoded. The field numbers are part of the
on-disk spool format: segments written by an earlier version are read after an upgrade. Source: the
Protocol Buffers encoding guide (varints, wire types, length-delimited fields).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import BinaryIO

REQUEST_INDEX_FIELD = 15000
"""Field number of ``hotspan_request_index``: the request's index in its batch file (far above any OTLP field)."""

TENANT_FIELD = 15001
"""Field number of ``hotspan_tenant``: the tenant the request's spans are stored for (:mod:`storage.tenancy`)."""

_LENGTH_DELIMITED = 2
_MAX_VARINT_BYTES = 10


class WireError(ValueError):
    """The bytes are not a batch file."""


def _varint(data: memoryview, pos: int, end: int) -> tuple[int, int]:
    """Read a varint at ``pos``; return ``(value, next position)``. Raises WireError."""
    value = 0
    shift = 0
    while pos < end and shift < 7 * _MAX_VARINT_BYTES:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise WireError("truncated or overlong varint")


def encode_varint(value: int) -> bytes:
    """The protobuf varint encoding of a non-negative integer."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_INDEX_KEY = encode_varint(REQUEST_INDEX_FIELD << 3)
_TENANT_KEY = encode_varint(TENANT_FIELD << 3 | _LENGTH_DELIMITED)


def _tail(index: int, tenant: str) -> bytes:
    name = tenant.encode()
    return _INDEX_KEY + encode_varint(index) + _TENANT_KEY + encode_varint(len(name)) + name


def write_batch(out: BinaryIO, requests: Iterable[tuple[bytes, str]], first_index: int = 0) -> int:
    """Write ``(body, tenant)`` requests to ``out``, each framed: its ``body`` with ``hotspan_request_index``
    (``first_index``, ``first_index + 1``, ...) and ``hotspan_tenant = tenant`` appended, length-prefixed
    (appending fields to a serialized message sets them: messages concatenate); return how many were written."""
    written = 0
    for index, (body, tenant) in enumerate(requests, start=first_index):
        # The frame's parts written one by one: joining them would copy every body once more.
        tail = _tail(index, tenant)
        out.write(encode_varint(len(body) + len(tail)))
        out.write(body)
        out.write(tail)
        written += 1
    return written


def read_batch(data: bytes) -> list[tuple[bytes, str]]:
    """The ``(body, tenant)`` requests of a batch file, in order, with the appended fields stripped.

    Raises:
        WireError: the data is not a sequence of framed requests.
    """
    view = memoryview(data)
    requests = []
    pos = 0
    while pos < len(view):
        size, pos = _varint(view, pos, len(view))
        end = pos + size
        if end > len(view):
            raise WireError("batch file is truncated")
        # Searched and sliced in place: each body is copied once, into the bytes returned.
        marker = _INDEX_KEY + encode_varint(len(requests)) + _TENANT_KEY
        tail_at = data.rfind(marker, pos, end)
        if tail_at < 0:
            raise WireError(f"request {len(requests)} of the batch lacks its index field")
        name_size, name_at = _varint(view, tail_at + len(marker), end)
        if name_at + name_size != end:
            raise WireError(f"request {len(requests)} of the batch does not end with its tenant")
        requests.append((data[pos:tail_at], data[name_at : name_at + name_size].decode()))
        pos = end
    return requests
