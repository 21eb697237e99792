"""Protobuf of a trace, for ``Accept: application/protobuf``: Tempo's ``tempopb.Trace`` (``/api/traces``) and
``tempopb.TraceByIDResponse`` (``/api/v2/traces``), grafana/tempo ``pkg/tempopb/tempo.proto``.

``Trace`` is ``repeated opentelemetry.proto.trace.v1.ResourceSpans batches = 1``: on the wire the same bytes as
OTLP's ``TracesData`` (``resource_spans = 1``), which is what is built here; ``TraceByIDResponse`` holds it as field
1 (``trace``). The input is :func:`api.jaeger.otlp.traces_data`'s OTLP JSON, whose hex IDs become bytes.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def trace_bytes(resource_spans: list[dict[str, Any]]) -> bytes:
    """``tempopb.Trace`` of OTLP JSON ``resourceSpans`` entries."""
    message = json_format.ParseDict({"resourceSpans": _base64_ids(resource_spans)}, TracesData())
    return message.SerializeToString()


def trace_by_id_response(resource_spans: list[dict[str, Any]]) -> bytes:
    """``tempopb.TraceByIDResponse`` holding the trace of ``resource_spans`` (field 1, length-delimited)."""
    trace = trace_bytes(resource_spans)
    return b"\x0a" + _varint(len(trace)) + trace


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


def _base64_ids(node: Any) -> Any:
    """``node`` with every hex trace/span ID as base64, protobuf JSON's spelling of ``bytes`` (OTLP JSON's is hex)."""
    if isinstance(node, list):
        return [_base64_ids(item) for item in node]
    if isinstance(node, dict):
        return {
            key: base64.b64encode(bytes.fromhex(value)).decode() if key in _ID_KEYS else _base64_ids(value)
            for key, value in node.items()
        }
    return node
