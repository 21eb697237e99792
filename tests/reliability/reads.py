"""Building OTLP requests and reading one trace back through every read path of a served Hotspan.

A plain module (not ``conftest``) so the reliability tests import it by a name no other folder shares.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from hotspan.server import RunningServer
from units import NS_PER_S as NS

BASE_NS = (int(time.time()) - 1800) * NS
"""Span starts half an hour ago: inside every default window, old enough to be quiet."""


@dataclass
class SpanSpec:
    """One span of :func:`request`: IDs as integers, times in ns after ``BASE_NS``."""

    span_id: int
    parent_id: int = 0
    name: str = "op"
    kind: int = Span.SPAN_KIND_SERVER
    start_ns: int = 0
    duration_ns: int = 1_000_000
    attributes: dict[str, str] = field(default_factory=dict)
    error: bool = False


def request(trace: int, spans: list[SpanSpec], service: str = "resend") -> bytes:
    """A serialized ``ExportTraceServiceRequest`` of ``spans`` in trace ``trace`` from ``service``."""
    req = ExportTraceServiceRequest()
    resource_spans = req.resource_spans.add()
    kv = resource_spans.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", service
    scope_spans = resource_spans.scope_spans.add()
    for spec in spans:
        span = scope_spans.spans.add()
        span.trace_id = trace.to_bytes(16, "big")
        span.span_id = spec.span_id.to_bytes(8, "big")
        if spec.parent_id:
            span.parent_span_id = spec.parent_id.to_bytes(8, "big")
        span.name, span.kind = spec.name, spec.kind
        span.start_time_unix_nano = BASE_NS + spec.start_ns
        span.end_time_unix_nano = BASE_NS + spec.start_ns + spec.duration_ns
        for key, value in spec.attributes.items():
            attribute = span.attributes.add()
            attribute.key, attribute.value.string_value = key, value
        if spec.error:
            span.status.code = 2
    return req.SerializeToString()


def post(server: RunningServer, body: bytes, timeout: float = 30) -> httpx.Response:
    """POST one protobuf body to ``/v1/traces``."""
    return httpx.post(
        f"{server.base_url}/v1/traces",
        content=body,
        headers={"content-type": "application/x-protobuf"},
        timeout=timeout,
    )


def trace_views(server: RunningServer, trace: int, service: str = "resend") -> dict[str, object]:
    """What every read path says about trace ``trace`` (spans counted, durations, rollups), after the ingest pipeline
    has stored everything and the trace pipeline has analysed it."""
    assert server.pipeline.flush(60)
    assert server.trace_pipeline is not None
    server.trace_pipeline.run_once(force=True)
    base = server.base_url
    trace_id = f"{trace:032x}"
    window = {"start_ns": BASE_NS - 120 * NS, "end_ns": BASE_NS + 3600 * NS}
    v1 = httpx.get(f"{base}/api/v1/traces/{trace_id}").json()
    search = httpx.get(f"{base}/api/v1/traces", params={"service": service, **window, "limit": 1000}).json()
    jaeger_v1 = httpx.get(f"{base}/api/traces/{trace_id}").json()
    jaeger_search = httpx.get(
        f"{base}/api/traces",
        params={"service": service, "start": window["start_ns"] // 1000, "end": window["end_ns"] // 1000},
    ).json()
    jaeger_v3 = httpx.get(f"{base}/api/v3/traces/{trace_id}").json()
    red = httpx.get(f"{base}/api/v1/red", params=window).json()
    stages = httpx.get(f"{base}/api/v1/traces/{trace_id}/stages").json()
    hotspots = httpx.get(f"{base}/api/v1/hotspots", params=window).json()
    topology = httpx.get(f"{base}/api/v1/topology", params=window).json()
    dependencies = httpx.get(
        f"{base}/api/dependencies", params={"endTs": window["end_ns"] // 1_000_000, "lookback": 3_600_000 * 2}
    ).json()
    rows = server.storage.clickhouse.query_rows(
        "SELECT count() FROM otel_traces WHERE TraceId = {t:String}", {"t": trace_id}
    )[0][0]
    return {
        "v1 spans": len(v1["spans"]),
        "v1 durations": sorted(span["duration_ns"] for span in v1["spans"]),
        "v1 search span_count": [t["span_count"] for t in search["traces"] if t["trace_id"] == trace_id],
        "jaeger v1 spans": len(jaeger_v1["data"][0]["spans"]),
        "jaeger v1 search spans": [len(t["spans"]) for t in jaeger_search["data"] if t["traceID"] == trace_id],
        "jaeger v3 spans": sum(
            len(scope["spans"]) for rs in jaeger_v3["result"]["resourceSpans"] for scope in rs["scopeSpans"]
        ),
        "red calls": sum(group["calls"] for group in red["groups"]),
        "stages total_ns": stages.get("total_ns"),
        "hotspot spans": sum(row["spans"] for row in hotspots["by_self_time"]),
        "topology calls": sum(edge["calls"] for edge in topology["edges"]),
        "dependencies": sum(link["callCount"] for link in dependencies["data"]),
        "stored rows": int(rows),
    }
