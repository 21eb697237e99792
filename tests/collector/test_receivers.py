"""Round trips through a served Hotspan: official OTLP exporters in, REST out; raw OTLP/HTTP edge cases."""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Callable

import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonHttpExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as ProtoHttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from hotspan.server import RunningServer

ATTRIBUTES = {
    "str": "hello",
    "bool": True,
    "int": -42,
    "big": 2**62,
    "double": 2.5,
    "strs": ["a", "b"],
    "ints": [1, 2],
    "bools": [True, False],
    "doubles": [0.5, 1.5],
}
EXPECTED_STRINGS = {
    "str": "hello",
    "bool": "true",
    "int": "-42",
    "big": str(2**62),
    "double": "2.5",
    "strs": '["a","b"]',
    "ints": "[1,2]",
    "bools": "[true,false]",
    "doubles": "[0.5,1.5]",
}
KINDS = {
    SpanKind.SERVER: "Server",
    SpanKind.CLIENT: "Client",
    SpanKind.INTERNAL: "Internal",
    SpanKind.PRODUCER: "Producer",
    SpanKind.CONSUMER: "Consumer",
}

Exporters = dict[str, Callable[[RunningServer], SpanExporter]]
EXPORTERS: Exporters = {
    "http-protobuf": lambda s: ProtoHttpExporter(endpoint=f"{s.base_url}/v1/traces"),
    "http-json": lambda s: JsonHttpExporter(endpoint=f"{s.base_url}/v1/traces"),
    "grpc": lambda s: GrpcExporter(endpoint=f"127.0.0.1:{s.grpc_port}", insecure=True),
}


def _emit(exporter: SpanExporter, service: str) -> list[ReadableSpan]:
    """Make one trace with every span kind, typed attributes, events, a link and an error status."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service, "deployment.environment": "test"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("roundtrip.scope", "9.9.9")
    with tracer.start_as_current_span("root", kind=SpanKind.SERVER, attributes=ATTRIBUTES) as root:
        root.add_event("started", {"step": 1, "ok": True})
        with tracer.start_as_current_span("call", kind=SpanKind.CLIENT) as call:
            call.set_status(Status(StatusCode.ERROR, "upstream failed"))
        for kind in (SpanKind.INTERNAL, SpanKind.PRODUCER, SpanKind.CONSUMER):
            with tracer.start_as_current_span(
                f"k-{kind.name}", kind=kind, links=[Link(call.get_span_context(), {"why": "retry"})]
            ):
                pass
    provider.shutdown()
    return list(memory.get_finished_spans())


@pytest.mark.parametrize("protocol", EXPORTERS)
def test_official_exporter_round_trip_is_exact(hotspan_server: RunningServer, protocol: str) -> None:
    sent = _emit(EXPORTERS[protocol](hotspan_server), f"svc-{protocol}")
    trace_id = f"{sent[0].context.trace_id:032x}"

    answer = httpx.get(f"{hotspan_server.base_url}/api/v1/traces/{trace_id}")

    assert answer.status_code == 200, answer.text
    stored = {span["span_id"]: span for span in answer.json()["spans"]}
    assert len(stored) == len(sent) == 5
    for span in sent:
        got = stored[f"{span.context.span_id:016x}"]
        assert got["trace_id"] == trace_id
        assert got["parent_span_id"] == (f"{span.parent.span_id:016x}" if span.parent else "")
        assert got["name"] == span.name
        assert got["service_name"] == f"svc-{protocol}"
        assert got["kind"] == KINDS[span.kind]
        assert got["start_time_unix_nano"] == span.start_time
        assert got["end_time_unix_nano"] == span.end_time
        assert got["duration_ns"] == span.end_time - span.start_time
        assert got["scope_name"] == "roundtrip.scope" and got["scope_version"] == "9.9.9"
        assert got["resource_attributes"]["deployment.environment"] == "test"
        assert [(e["name"], e["time_unix_nano"]) for e in got["events"]] == [(e.name, e.timestamp) for e in span.events]
        assert [(lk["span_id"], lk["attributes"]) for lk in got["links"]] == [
            (f"{lk.context.span_id:016x}", {"why": "retry"}) for lk in span.links
        ]
    root = next(s for s in stored.values() if s["name"] == "root")
    assert {k: root["attributes"][k] for k in ATTRIBUTES} == EXPECTED_STRINGS
    assert root["events"][0]["attributes"] == {"step": "1", "ok": "true"}
    call = next(s for s in stored.values() if s["name"] == "call")
    assert (call["status_code"], call["status_message"]) == ("Error", "upstream failed")


def _request(*span_ids: str, trace_id: str = "0af7651916cd43dd8448eb211c80319c") -> dict:
    spans = [
        {
            "traceId": trace_id,
            "spanId": span_id,
            "name": f"span-{span_id}",
            "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000000001000000",
            "attributes": [
                {"key": "blob", "value": {"bytesValue": "AAE="}},
                {
                    "key": "map",
                    "value": {"kvlistValue": {"values": [{"key": "n", "value": {"doubleValue": 1e-7}}]}},
                },
            ],
        }
        for span_id in span_ids
    ]
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "raw"}}]},
                "scopeSpans": [{"spans": spans}],
            }
        ]
    }


def test_json_bad_span_gets_partial_success_and_batch_mates_are_stored(
    hotspan_server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    body = _request("1111111111111111", "not-an-id", "2222222222222222")

    with caplog.at_level(logging.INFO, logger="collector.results"):
        answer = httpx.post(f"{hotspan_server.base_url}/v1/traces", json=body)
        assert hotspan_server.pipeline.flush(30)
    # One log line per answered request, not one more when the writer checks the stored batch.
    assert [r.getMessage() for r in caplog.records if r.name == "collector.results"] == [
        "1 span(s) rejected: resourceSpans[0].scopeSpans[0].spans[1]: spanId 'not-an-id' is neither hex nor base64"
    ]

    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    partial = answer.json()["partialSuccess"]
    assert int(partial["rejectedSpans"]) == 1
    assert "spans[1]: spanId 'not-an-id' is neither hex nor base64" in partial["errorMessage"]
    spans = httpx.get(f"{hotspan_server.base_url}/api/v1/traces/0af7651916cd43dd8448eb211c80319c").json()["spans"]
    assert sorted(s["span_id"] for s in spans) == ["1111111111111111", "2222222222222222"]
    assert spans[0]["attributes"] == {"blob": "AAE=", "map": '{"n":1e-07}'}


def test_gzip_protobuf_is_accepted_and_answered_in_protobuf(hotspan_server: RunningServer) -> None:
    from collector.otlp_json import request_from_json

    request, _ = request_from_json(_request("3333333333333333", trace_id="1af7651916cd43dd8448eb211c80319c"))
    answer = httpx.post(
        f"{hotspan_server.base_url}/v1/traces",
        content=gzip.compress(request.SerializeToString()),
        headers={"content-type": "application/x-protobuf", "content-encoding": "gzip"},
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/x-protobuf"
    assert ExportTraceServiceResponse.FromString(answer.content) == ExportTraceServiceResponse()
    found = httpx.get(f"{hotspan_server.base_url}/api/v1/traces/1AF7651916CD43DD8448EB211C80319C")
    assert [s["span_id"] for s in found.json()["spans"]] == ["3333333333333333"]


@pytest.mark.parametrize(
    ("content", "headers", "status", "message"),
    [
        (b"{not json", {"content-type": "application/json"}, 400, "body is not valid JSON"),
        (
            b"\xff\xfe\x00garbage",
            {"content-type": "application/x-protobuf"},
            400,
            "not a protobuf ExportTraceServiceRequest",
        ),
        (b"{}", {"content-type": "text/plain"}, 415, "Content-Type must be"),
        (
            b"{}",
            {"content-type": "application/json", "content-encoding": "br"},
            415,
            "Content-Encoding must be",
        ),
        (
            b"not gzip",
            {"content-type": "application/json", "content-encoding": "gzip"},
            400,
            "not valid gzip",
        ),
        (b"x" * (16 * 1024 * 1024 + 1), {"content-type": "application/json"}, 413, "exceeds the limit"),
        (
            gzip.compress(b" " * (17 * 1024 * 1024)),
            {"content-type": "application/json", "content-encoding": "gzip"},
            413,
            "exceeds the limit",
        ),
    ],
)
def test_unacceptable_bodies_get_the_otlp_status_and_a_named_reason(
    hotspan_server: RunningServer, content: bytes, headers: dict, status: int, message: str
) -> None:
    answer = httpx.post(f"{hotspan_server.base_url}/v1/traces", content=content, headers=headers)
    assert answer.status_code == status
    if answer.headers["content-type"] == "application/x-protobuf":
        text = status_pb2.Status.FromString(answer.content).message
    else:
        text = json.loads(answer.content)["message"]
    assert message in text


def test_grpc_partial_success_for_a_bad_span(hotspan_server: RunningServer) -> None:
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    from collector.otlp_json import request_from_json

    request, _ = request_from_json(
        _request("4444444444444444", "5555555555555555", trace_id="2af7651916cd43dd8448eb211c80319c")
    )
    request.resource_spans[0].scope_spans[0].spans[1].span_id = b"\x01\x02"
    with grpc.insecure_channel(f"127.0.0.1:{hotspan_server.grpc_port}") as channel:
        response = trace_service_pb2_grpc.TraceServiceStub(channel).Export(
            ExportTraceServiceRequest.FromString(request.SerializeToString()), timeout=10
        )
    assert response.partial_success.rejected_spans == 1
    assert "spanId must be 8 bytes" in response.partial_success.error_message
