"""OTLP/JSON written with the proto's own field names (``resource_spans``, ``trace_id``): what protobuf's JSON
printers write with ``preserving_proto_field_name`` (Python's ``MessageToJson``/``MessageToDict``, Go's
``protojson`` with ``UseProtoNames``). The OTLP specification allows only lowerCamelCase keys and has receivers
ignore unknown fields, so such a body was answered 200 and none of it stored; the OpenTelemetry Collector's and
Jaeger's readers accept both spellings, and so does Hotspan now, on the OTLP/HTTP receiver and in
``hotspan import``. The bodies are the shared real OTLP files, printed again by protobuf itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.formats.otlp import traces_request
from collector.otlp_body import PayloadError, decode_request
from collector.otlp_json import request_from_json
from hotspan.importer import StoreSink, import_paths
from hotspan.server import RunningServer
from storage.clickhouse import ClickHouse
from storage.writer import ClickHouseTraceWriter
from testkit import TRACES

JSON_FILES = sorted(path.name for path in (TRACES / "otlp").glob("*.json"))


def camel_request(name: str) -> ExportTraceServiceRequest:
    """The request a shared OTLP/JSON file holds, read as the receivers read lowerCamelCase JSON."""
    document = traces_request(json.loads((TRACES / "otlp" / name).read_text("utf-8")))
    request, rejections = request_from_json(document)
    assert not rejections
    return request


def printed(request: ExportTraceServiceRequest, *, proto_names: bool = True) -> dict:
    """``request`` printed by protobuf (IDs in base64, enums by name), with the proto's field names or
    protobuf's lowerCamelCase JSON names."""
    return MessageToDict(request, preserving_proto_field_name=proto_names)


def span_count(request: ExportTraceServiceRequest) -> int:
    return sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)


def test_the_files_hold_spans() -> None:
    assert len(JSON_FILES) >= 4
    assert all(span_count(camel_request(name)) for name in JSON_FILES)


@pytest.mark.parametrize("name", JSON_FILES)
def test_proto_field_names_decode_to_the_same_request(name: str) -> None:
    expected = camel_request(name)
    body = json.dumps(printed(expected)).encode()
    assert b'"resource_spans"' in body and b'"span_id"' in body

    request, rejections = decode_request(body, "application/json")

    assert not rejections
    assert request == expected


def test_both_spellings_in_one_object_keep_every_span() -> None:
    request = camel_request("otlp2parquet__trace.json")
    body = printed(request, proto_names=False)
    # One resource entry holding its scopes under both names: neither list is dropped.
    body["resourceSpans"][0]["scope_spans"] = printed(request)["resource_spans"][0]["scope_spans"]

    decoded, rejections = decode_request(json.dumps(body).encode(), "application/json")

    assert not rejections
    assert span_count(decoded) == 2 * span_count(request)


def test_a_request_over_the_span_limit_is_refused_in_either_spelling() -> None:
    request = camel_request("jaeger__otel_traces_01.json")
    body = json.dumps(printed(request)).encode()
    with pytest.raises(PayloadError, match="at most 1 per request") as refused:
        decode_request(body, "application/json", max_spans=1)
    assert refused.value.status == 413


def test_the_receiver_stores_every_span_of_a_proto_named_body(hotspan_server: RunningServer) -> None:
    request = camel_request("jaegerui__otlp2jaeger-multi-in-combined.json")
    body = printed(request)

    answer = httpx.post(f"{hotspan_server.base_url}/v1/traces", json=body)
    assert hotspan_server.pipeline.flush(30)

    assert answer.status_code == 200 and answer.json() == {}
    trace_id = request.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()
    stored = httpx.get(f"{hotspan_server.base_url}/api/v1/traces/{trace_id}").json()["spans"]
    sent = {
        span.span_id.hex(): span.name
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    }
    assert {span["span_id"]: span["name"] for span in stored} == sent
    # The same spans sent again in lowerCamelCase are the same spans: nothing is stored twice.
    again = httpx.post(f"{hotspan_server.base_url}/v1/traces", json=printed(request, proto_names=False))
    assert hotspan_server.pipeline.flush(30)
    assert again.status_code == 200
    assert len(httpx.get(f"{hotspan_server.base_url}/api/v1/traces/{trace_id}").json()["spans"]) == len(sent)


def test_import_reads_a_proto_named_file(store: ClickHouse, tmp_path: Path) -> None:
    request = camel_request("otlp2parquet__trace.json")
    saved = tmp_path / "proto_names.json"
    saved.write_text(json.dumps(printed(request)), encoding="utf-8")

    summary = import_paths([saved], StoreSink(ClickHouseTraceWriter(store)), progress=False)

    assert (summary.spans, summary.rejected, summary.problems) == (span_count(request), 0, [])
    assert store.query_rows("SELECT count() FROM otel_traces")[0][0] == span_count(request)
