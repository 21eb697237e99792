"""Jaeger JSON → OTLP JSON on the shared Jaeger files, values checked by hand against the source JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from collector.formats import Payload, Rejected, detect_format, read_payloads

JAEGER = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "traces" / "jaeger"


def converted(path: Path) -> list[dict[str, Any]]:
    """Each converted span with `service`, `resource` (key → AnyValue) and `scope` added, in payload order."""
    spans = []
    for payload in read_payloads(path):
        assert isinstance(payload, Payload), payload
        for resource_spans in payload.body["resourceSpans"]:
            resource = {kv["key"]: kv["value"] for kv in resource_spans["resource"]["attributes"]}
            for scope_spans in resource_spans["scopeSpans"]:
                for span in scope_spans["spans"]:
                    service = resource["service.name"]["stringValue"]
                    spans.append({**span, "service": service, "resource": resource, "scope": scope_spans["scope"]})
    return spans


def only(spans: list[dict[str, Any]], **match: object) -> dict[str, Any]:
    [span] = [span for span in spans if all(span.get(key) == value for key, value in match.items())]
    return span


def attributes(span: dict[str, Any]) -> dict[str, dict]:
    return {kv["key"]: kv["value"] for kv in span.get("attributes", [])}


def test_ui_trace_object_ids_times_tags_and_status() -> None:
    spans = converted(JAEGER / "jaeger__ui_01.json")

    tagged = only(spans, name="some-operation", spanId="0000000000000002")
    assert tagged["traceId"] == "00000000000000000000000000000001"  # 64-bit "0000000000000001", padded
    assert tagged["startTimeUnixNano"] == "1485467191639875000"  # startTime 1485467191639875 µs
    assert tagged["endTimeUnixNano"] == "1485467191639880000"  # + duration 5 µs
    assert tagged["service"] == "service-x"  # processID p1
    assert tagged["status"] == {"code": 2}  # error=true
    assert attributes(tagged) == {
        "peer.service": {"stringValue": "service-y"},
        "peer.ipv4": {"intValue": "23456"},
        "temperature": {"doubleValue": 72.5},
        "javascript_limit": {"intValue": "9223372036854775222"},  # quoted in the file, beyond 2**53
        "blob": {"bytesValue": "AAAwOQ=="},
    }


def test_ui_references_become_parent_and_links() -> None:
    spans = converted(JAEGER / "jaeger__ui_01.json")

    # references: CHILD_OF ff/ff (another trace), CHILD_OF 1/2, FOLLOWS_FROM 1/2
    reference_test = only(spans, name="reference-test")
    assert reference_test["parentSpanId"] == "0000000000000002"
    assert reference_test["links"] == [
        {
            "traceId": "000000000000000000000000000000ff",
            "spanId": "00000000000000ff",
            "attributes": [{"key": "opentracing.ref_type", "value": {"stringValue": "child_of"}}],
        },
        {
            "traceId": "00000000000000000000000000000001",
            "spanId": "0000000000000002",
            "attributes": [{"key": "opentracing.ref_type", "value": {"stringValue": "follows_from"}}],
        },
    ]
    child = only(spans, name="preserveParentID-test")
    assert child["parentSpanId"] == "0000000000000004"
    assert "links" not in child
    assert child["endTimeUnixNano"] == "1485467191639879000"  # duration 4 µs


def test_logs_become_events_named_by_their_event_field() -> None:
    span = only(converted(JAEGER / "jaeger__ui_01.json"), name="test-general-conversion")

    assert span["events"] == [
        {"timeUnixNano": "1485467191639875000", "name": "some-event"},
        {
            "timeUnixNano": "1485467191639875000",
            "name": "log",
            "attributes": [{"key": "x", "value": {"stringValue": "y"}}],
        },
    ]


def test_domain_model_reads_base64_ids_rfc3339_and_go_durations() -> None:
    spans = converted(JAEGER / "jaeger__domain_01.json")

    span = only(spans, name="some-operation", spanId="0000000000000002")  # "AAAAAAAAAAI="
    assert span["traceId"] == "00000000000000000000000000000001"  # "AAAAAAAAAAAAAAAAAAAAAQ=="
    # 2017-01-26T16:46:31.639875139-05:00 = 21:46:31.639875139 UTC, to the nanosecond
    assert span["startTimeUnixNano"] == "1485467191639875139"
    assert span["endTimeUnixNano"] == "1485467191639880139"  # + "5000ns"
    assert attributes(span)["peer.ipv4"] == {"intValue": "23456"}  # vType INT64, vInt64
    assert attributes(span)["blob"] == {"bytesValue": "AAAwOQ=="}  # vType BINARY
    # Log fields without vType are strings (protobuf JSON omits the default enum value).
    assert only(spans, name="test-general-conversion")["events"][0]["name"] == "some-event"


def test_domain_model_and_ui_form_of_one_trace_convert_alike() -> None:
    # ui_01 is the Jaeger UI rendering of domain_01; only the UI form's µs precision differs.
    def to_micros(value: object) -> object:
        if isinstance(value, dict):
            return {
                key: str(int(item) // 1000) if key.endswith("UnixNano") else to_micros(item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [to_micros(item) for item in value]
        return value

    assert to_micros(converted(JAEGER / "jaeger__domain_01.json")) == to_micros(
        converted(JAEGER / "jaeger__ui_01.json")
    )


def test_api_download_process_tags_become_resource_attributes() -> None:
    spans = converted(JAEGER / "tracecompass__opentracing_multiple_services.json")

    span = only(spans, spanId="2e44971368c185a6")
    assert span["resource"] == {
        "service.name": {"stringValue": "hello-world"},
        "host.name": {"stringValue": "mystery"},  # process tag "hostname"
        "ip": {"stringValue": "127.0.1.1"},
        "opencensus.exporterversion": {"stringValue": "Jaeger-Java-0.26.0"},  # "jaeger.version"
    }
    assert span["traceId"] == "0000000000000000410a7dbc6d6cfeb6"
    assert span["parentSpanId"] == "410a7dbc6d6cfeb6"
    assert span["kind"] == 3  # span.kind=client
    assert "span.kind" not in attributes(span)
    assert span["events"] == [
        {
            "timeUnixNano": "1527684461910000000",
            "name": "string-format",
            "attributes": [{"key": "value", "value": {"stringValue": "Salut, Kathouu!"}}],
        }
    ]
    root = only(spans, spanId="410a7dbc6d6cfeb6")
    assert "parentSpanId" not in root
    assert attributes(root)["sampler.param"] == {"boolValue": True}


def test_redux_state_library_tags_become_scope() -> None:
    path = JAEGER / "jaegerui__flamegraph_testTrace.json"
    spans = converted(path)

    http_get = only(spans, spanId="d81ccf159d71bc66")
    assert detect_format(path) == "jaeger"
    assert http_get["scope"] == {
        "name": "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp",
        "version": "semver:0.27.0",
    }
    assert http_get["traceId"] == "84b3fad94c6112edd6af3347d06f6f1d"
    assert http_get["parentSpanId"] == "487f03177ef9cf89"
    assert http_get["kind"] == 3
    assert http_get["service"] == "load-generator"
    assert attributes(http_get)["http.status_code"] == {"intValue": "200"}
    assert "status" not in http_get  # HTTP 200 leaves the status unset
    assert not {"otel.library.name", "otel.library.version", "span.kind"} & attributes(http_get).keys()
    assert only(spans, spanId="487f03177ef9cf89")["scope"] == {"name": "go.opentelemetry.io/otel/sdk/tracer"}
    assert only(spans, spanId="3d4670fa91902216")["kind"] == 2


def test_short_hex_span_ids_are_left_padded() -> None:
    spans = converted(JAEGER / "jaegerui__stats_spanLongerAsParent.json")

    assert {span["spanId"] for span in spans} >= {"04b52eb0cabcb50a", "00a0000000000000", "0000000000000001"}
    assert only(spans, spanId="afa59bdef0fc2561")["parentSpanId"] == "04b52eb0cabcb50a"


def test_non_hex_ids_reject_each_span_naming_the_field() -> None:
    path = JAEGER / "jaegerui__tracegraph_testTrace.json"

    items = list(read_payloads(path))

    assert len(items) == 11 + 1
    assert all(isinstance(item, Rejected) for item in items)
    assert items[0] == Rejected(f"{path}#/spans/0", "traceID 'trace-123' is not an ID of 1 to 32 hex digits", 1)
    # The last names the format the file was read as: every span was rejected.
    assert items[-1] == Rejected(str(path), "read as Jaeger JSON, and none of its spans could be converted", 0)


def test_tracegraph_with_hex_ids_kinds_follows_from_and_error(tmp_path: Path) -> None:
    # The tracegraph file with its made-up IDs replaced by hex ones: "trace-123" → "123abc",
    # "span-2_1" → "a21", "span-7" → "a7".
    text = (JAEGER / "jaegerui__tracegraph_testTrace.json").read_text()
    text = text.replace('"trace-123"', '"123abc"')
    text = re.sub(r'"span-([0-9_]+)"', lambda match: '"a' + match[1].replace("_", "") + '"', text)
    path = tmp_path / "tracegraph-hex.json"
    path.write_text(text)

    spans = converted(path)

    assert len(spans) == 11
    root = only(spans, spanId="00000000000000a1")
    assert root["traceId"] == "00000000000000000000000000123abc"
    assert (root["kind"], root["startTimeUnixNano"], root["endTimeUnixNano"]) == (
        2,
        "1542666452979000000",
        "1542666453369000000",  # + 390000 µs
    )
    assert root["resource"]["host.name"] == {"stringValue": "foobar.org"}
    failed = only(spans, spanId="00000000000000a2")
    assert failed["status"] == {"code": 2}  # error tag of type bool with the string value "true"
    assert "error" not in attributes(failed)
    assert only(spans, spanId="00000000000000a6")["kind"] == 4  # producer
    consumer = only(spans, spanId="00000000000000a7")
    # The only reference is FOLLOWS_FROM: it is the parent (as Jaeger's Span.ParentSpanID) and a link
    # that says how the two are related.
    assert consumer["kind"] == 5
    assert consumer["parentSpanId"] == "00000000000000a6"
    assert consumer["links"] == [
        {
            "traceId": "00000000000000000000000000123abc",
            "spanId": "00000000000000a6",
            "attributes": [{"key": "opentracing.ref_type", "value": {"stringValue": "follows_from"}}],
        }
    ]
    assert only(spans, spanId="00000000000000a5")["kind"] == 0  # no span.kind tag


def test_other_jaeger_containers(tmp_path: Path) -> None:
    ui = json.loads((JAEGER / "jaeger__ui_01.json").read_text())
    domain = json.loads((JAEGER / "jaeger__domain_01.json").read_text())
    array = tmp_path / "array.json"
    array.write_text(json.dumps([ui]))  # a JSON array of trace objects
    batch = tmp_path / "batch.json"  # a domain-model Batch: the process beside the spans
    batch_spans = [{k: v for k, v in span.items() if k != "process"} for span in domain["spans"][2:]]
    batch.write_text(json.dumps({"process": {"serviceName": "service-y"}, "spans": batch_spans}))

    assert detect_format(array) == detect_format(batch) == "jaeger"
    assert [span["spanId"] for span in converted(array)] == [
        span["spanId"] for span in converted(JAEGER / "jaeger__ui_01.json")
    ]
    assert {span["service"] for span in converted(batch)} == {"service-y"}
    assert len(converted(batch)) == 3


def test_status_from_otel_and_http_tags(tmp_path: Path) -> None:
    # The flamegraph trace with its tags edited: otel.status_* on the root, HTTP 404 on the client span
    # and on the server span, HTTP 503 on a copy of the server span.
    state = json.loads((JAEGER / "jaegerui__flamegraph_testTrace.json").read_text())
    spans = {span["spanID"]: span for span in state["data"]["spans"]}

    def set_tag(span_id: str, key: str, kind: str, value: object) -> None:
        tags = [tag for tag in spans[span_id]["tags"] if tag["key"] != key]
        spans[span_id]["tags"] = [*tags, {"key": key, "type": kind, "value": value}]

    set_tag("487f03177ef9cf89", "otel.status_code", "string", "ERROR")
    set_tag("487f03177ef9cf89", "otel.status_description", "string", "no vehicle")
    set_tag("d81ccf159d71bc66", "http.status_code", "int64", 404)
    set_tag("3d4670fa91902216", "http.status_code", "int64", 404)
    server_503 = {**spans["3d4670fa91902216"], "spanID": "00000000000000e5"}
    spans["00000000000000e5"] = server_503
    set_tag("00000000000000e5", "http.status_code", "int64", 503)
    state["data"]["spans"] = list(spans.values())
    path = tmp_path / "statuses.json"
    path.write_text(json.dumps(state))

    converted_spans = converted(path)

    root = only(converted_spans, spanId="487f03177ef9cf89")
    assert root["status"] == {"code": 2, "message": "no vehicle"}
    assert not {"otel.status_code", "otel.status_description"} & attributes(root).keys()
    assert only(converted_spans, spanId="d81ccf159d71bc66")["status"] == {"code": 2}  # client, 404
    assert "status" not in only(converted_spans, spanId="3d4670fa91902216")  # server, 404: the client's fault
    assert only(converted_spans, spanId="00000000000000e5")["status"] == {"code": 2}  # server, 503


def test_jaeger_api_v3_envelope_is_unwrapped(tmp_path: Path) -> None:
    request = json.loads((JAEGER / "jaeger__example_trace.json").read_text())
    path = tmp_path / "v3.json"
    path.write_text(json.dumps({"result": request}))  # as GET /api/v3/traces/{id} answers

    assert detect_format(path) == "otlp-json"
    assert list(read_payloads(path)) == [Payload("application/json", request, str(path))]


def test_a_binary_tag_that_is_not_ascii_rejects_its_span_only(tmp_path: Path) -> None:
    # Found by the damaged-files property test: "\x80" is not base64 and not even ASCII.
    document = json.loads((JAEGER / "jaeger__domain_01.json").read_text())
    spans = document["spans"] if "spans" in document else document["data"][0]["spans"]
    spans[0]["tags"] = [{"key": "blob", "vType": "BINARY", "vBinary": "\x80"}]
    path = tmp_path / "binary.json"
    path.write_text(json.dumps(document))

    items = list(read_payloads(path))

    rejected = [item for item in items if isinstance(item, Rejected)]
    assert len(rejected) == 1 and "is not base64" in rejected[0].reason
    assert sum(1 for item in items if isinstance(item, Payload)) >= 1
