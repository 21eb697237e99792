"""Large inputs are split into payloads of at most `max_spans_per_payload` spans, losing nothing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.formats import Payload, read_payloads

TRACES = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "traces"


def span_keys(payload: Payload) -> list[tuple[str, str, str]]:
    """(service.name, trace ID, span ID) of each span of a payload."""
    keys = []
    if isinstance(payload.body, bytes):
        for rs in ExportTraceServiceRequest.FromString(payload.body).resource_spans:
            [service] = [kv.value.string_value for kv in rs.resource.attributes if kv.key == "service.name"]
            keys += [(service, s.trace_id.hex(), s.span_id.hex()) for ss in rs.scope_spans for s in ss.spans]
    else:
        for rs in payload.body["resourceSpans"]:
            [service] = [
                kv["value"]["stringValue"] for kv in rs["resource"]["attributes"] if kv["key"] == "service.name"
            ]
            keys += [(service, s["traceId"], s["spanId"]) for ss in rs["scopeSpans"] for s in ss["spans"]]
    return keys


def all_span_keys(path: Path, max_spans: int) -> tuple[list[Payload], Counter]:
    payloads = list(read_payloads(path, max_spans_per_payload=max_spans))
    assert all(isinstance(payload, Payload) for payload in payloads)
    return payloads, Counter(key for payload in payloads for key in span_keys(payload))


def test_zipkin_file_split_into_labelled_payloads() -> None:
    path = TRACES / "zipkin" / "zipkin__smartthings-oauth-authorization.json"

    payloads, keys = all_span_keys(path, 50)

    # 175 records, 172 spans: five Kafka receive records merge into two (see test_formats_corpus.py).
    assert [len(span_keys(payload)) for payload in payloads] == [50, 50, 50, 22]
    assert [payload.source for payload in payloads] == [
        f"{path} (spans 1-50 of 172)",
        f"{path} (spans 51-100 of 172)",
        f"{path} (spans 101-150 of 172)",
        f"{path} (spans 151-172 of 172)",
    ]
    assert keys == all_span_keys(path, 5000)[1]


def test_protobuf_split_keeps_resources() -> None:
    path = TRACES / "otlp" / "otlp2parquet__traces.pb"

    payloads, keys = all_span_keys(path, 5)

    assert [len(span_keys(payload)) for payload in payloads] == [5, 5, 5, 4]
    assert {payload.content_type for payload in payloads} == {"application/x-protobuf"}
    assert keys == all_span_keys(path, 5000)[1]
    assert len({service for service, _, _ in keys}) == 8


def test_json_lines_split_per_line() -> None:
    path = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"

    payloads, keys = all_span_keys(path, 3)

    assert max(len(span_keys(payload)) for payload in payloads) == 3
    assert sum(keys.values()) == 547
    assert keys == all_span_keys(path, 5000)[1]
    assert any(payload.source.startswith(f"{path}:") and "(spans 1-3 of" in payload.source for payload in payloads)


def test_otlp_json_split_keeps_scope() -> None:
    path = TRACES / "otlp" / "jaeger__otel_traces_01.json"
    [whole] = read_payloads(path)

    payloads = list(read_payloads(path, max_spans_per_payload=1))

    assert len(payloads) == 4
    for payload in payloads:
        [resource_spans] = payload.body["resourceSpans"]
        [scope_spans] = resource_spans["scopeSpans"]
        assert resource_spans["resource"] == whole.body["resourceSpans"][0]["resource"]
        assert {key: value for key, value in scope_spans.items() if key != "spans"} in [
            {key: value for key, value in original.items() if key != "spans"}
            for original in whole.body["resourceSpans"][0]["scopeSpans"]
        ]
