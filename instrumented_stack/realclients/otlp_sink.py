"""A minimal OTLP/HTTP traces receiver that keeps what it is sent, for writing captures as OTLP JSON files.

``POST /v1/traces`` accepts ``application/x-protobuf`` (``ExportTraceServiceRequest``, optionally gzip) and
answers an empty ``ExportTraceServiceResponse``. :meth:`OtlpSink.otlp_json` gives everything received as one
OTLP/JSON request, written as the OTLP specification's JSON encoding asks (hex trace and span ids, enums as
integers, camelCase field names), so ``hotspan import`` and any OTLP/JSON reader take it.
"""

from __future__ import annotations

import base64
import gzip
import threading
from typing import Any

from fastapi import FastAPI, Request, Response
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


class OtlpSink:
    """Received export requests, in arrival order (thread-safe)."""

    def __init__(self) -> None:
        self._requests: list[ExportTraceServiceRequest] = []
        self._lock = threading.Lock()

    def add(self, body: bytes) -> None:
        """Keep one protobuf ``ExportTraceServiceRequest``. Raises ``DecodeError`` for another body."""
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self._lock:
            self._requests.append(request)

    def span_count(self) -> int:
        """Spans received so far."""
        with self._lock:
            return sum(len(s.spans) for r in self._requests for rs in r.resource_spans for s in rs.scope_spans)

    def otlp_json(self, trace_ids: set[str] | None = None) -> dict[str, Any]:
        """Everything received as one OTLP/JSON ``ExportTraceServiceRequest`` (only ``trace_ids`` when given)."""
        with self._lock:
            requests = list(self._requests)
        resource_spans: list[dict[str, Any]] = []
        for request in requests:
            for entry in MessageToDict(request, use_integers_for_enums=True).get("resourceSpans", []):
                for scope in entry.get("scopeSpans", []):
                    spans = [_hex_ids(span) for span in scope.get("spans", [])]
                    scope["spans"] = [s for s in spans if trace_ids is None or s["traceId"] in trace_ids]
                entry["scopeSpans"] = [scope for scope in entry.get("scopeSpans", []) if scope["spans"]]
                if entry["scopeSpans"]:
                    resource_spans.append(entry)
        return {"resourceSpans": resource_spans}


def _hex_ids(span: dict[str, Any]) -> dict[str, Any]:
    for key in _ID_FIELDS:
        if span.get(key):
            span[key] = base64.b64decode(span[key]).hex()
    for link in span.get("links", []):
        for key in ("traceId", "spanId"):
            if link.get(key):
                link[key] = base64.b64decode(link[key]).hex()
    return span


def create_sink_app(sink: OtlpSink) -> FastAPI:
    """The receiver's app: ``POST /v1/traces`` into ``sink``."""
    app = FastAPI(title="otlp-sink")

    @app.post("/v1/traces", operation_id="export_traces", description="OTLP/HTTP protobuf traces export.")
    async def export(request: Request) -> Response:
        body = await request.body()
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        sink.add(body)
        return Response(ExportTraceServiceResponse().SerializeToString(), media_type="application/x-protobuf")

    return app
