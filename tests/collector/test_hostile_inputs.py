"""Inputs that broke other trace stores, each sent to a served Hotspan and read back.

Each test names the public bug report it comes from.
"""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from hotspan.server import RunningServer

TRACE = "5b8efff798038103d269b633813fc60c"
START = 1_700_000_000_000_000_000


def span(span_id: str = "1111111111111111", **fields: object) -> dict:
    base = {
        "traceId": TRACE,
        "spanId": span_id,
        "name": "op",
        "kind": 2,
        "startTimeUnixNano": str(START),
        "endTimeUnixNano": str(START + 1000),
    }
    base.update(fields)
    return base


def body(*spans: dict, resource: list | None = None) -> dict:
    attributes = resource if resource is not None else [{"key": "service.name", "value": {"stringValue": "hostile"}}]
    return {"resourceSpans": [{"resource": {"attributes": attributes}, "scopeSpans": [{"spans": list(spans)}]}]}


def export(server: RunningServer, payload: dict) -> dict:
    answer = httpx.post(
        f"{server.base_url}/v1/traces", content=json.dumps(payload), headers={"content-type": "application/json"}
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def stored(server: RunningServer, trace_id: str = TRACE) -> list[dict]:
    return server.storage.clickhouse.query_arrow(
        "SELECT SpanId, ParentSpanId, SpanName, Duration, SpanAttributes, ResourceAttributes FROM otel_traces"
        " WHERE TraceId = {t:String} ORDER BY SpanId",
        {"t": trace_id},
    ).to_pylist()


def test_end_before_start_is_rejected_not_wrapped(hotspan_server: RunningServer) -> None:
    """weaveworks-experiments/kspan#22: a negative duration "appears as a span of 2^64us"."""
    answer = export(hotspan_server, body(span(endTimeUnixNano=str(START - 1))))
    assert int(answer["partialSuccess"]["rejectedSpans"]) == 1
    assert (
        f"spans[0]: endTimeUnixNano {START - 1} is before startTimeUnixNano {START}"
        in answer["partialSuccess"]["errorMessage"]
    )
    assert stored(hotspan_server) == []


def test_a_span_without_an_end_is_kept_as_sent_when_it_started(hotspan_server: RunningServer) -> None:
    """An exporter flushing a root that never ended sends ``endTimeUnixNano`` 0 or leaves it out (proto3's default);
    rejected, the root's name, attributes and its children's parent were lost and the trace read as rootless. It is
    stored with duration 0 (over protobuf too, where the compiled scanner leaves it to Python), noted, and a later
    copy that ended replaces it."""
    root = span(endTimeUnixNano="0", name="agent run")
    child = span("2222222222222222", parentSpanId="1111111111111111", endTimeUnixNano=str(START + 900))
    unset = {key: value for key, value in span("3333333333333333").items() if key != "endTimeUnixNano"}
    answer = export(hotspan_server, body(root, child, unset))
    assert int(answer["partialSuccess"].get("rejectedSpans", 0)) == 0
    assert answer["partialSuccess"]["errorMessage"] == (
        "2 spans have no endTimeUnixNano (0: the span had not ended when sent), first "
        "resourceSpans[0].scopeSpans[0].spans[0]; stored with duration 0, as sent when it started"
    )
    assert [(r["SpanId"], r["SpanName"], r["Duration"]) for r in stored(hotspan_server)] == [
        ("1111111111111111", "agent run", 0),
        ("2222222222222222", "op", 900),
        ("3333333333333333", "op", 0),
    ]
    request = ExportTraceServiceRequest()
    one = request.resource_spans.add().scope_spans.add().spans.add()
    one.trace_id, one.span_id, one.name, one.start_time_unix_nano = bytes.fromhex(TRACE), b"\x44" * 8, "pb", START
    answer = httpx.post(
        f"{hotspan_server.base_url}/v1/traces",
        content=request.SerializeToString(),
        headers={"content-type": "application/x-protobuf"},
    )
    assert ExportTraceServiceResponse.FromString(answer.content).partial_success.rejected_spans == 0
    export(hotspan_server, body(span(endTimeUnixNano=str(START + 1000), name="agent run")))
    found = httpx.get(f"{hotspan_server.base_url}/api/v1/traces/{TRACE}", timeout=10).json()["spans"]
    assert {s["span_id"]: s["duration_ns"] for s in found} == {
        "1111111111111111": 1000,
        "2222222222222222": 900,
        "3333333333333333": 0,
        "4444444444444444": 0,
    }


def test_64_bit_trace_ids_are_left_padded(hotspan_server: RunningServer) -> None:
    """openzipkin/b3-propagation#6: 64- and 128-bit trace IDs of one system must meet."""
    export(hotspan_server, body(span(traceId="d269b633813fc60c")))
    rows = stored(hotspan_server, "0000000000000000d269b633813fc60c")
    assert [r["SpanId"] for r in rows] == ["1111111111111111"]
    found = httpx.get(f"{hotspan_server.base_url}/api/v1/traces/d269b633813fc60c").json()
    assert [s["span_id"] for s in found["spans"]] == ["1111111111111111"]


def test_base64_ids_in_json_are_accepted(hotspan_server: RunningServer) -> None:
    """open-telemetry/opentelemetry-collector#8720: base64 IDs (protobuf's JSON mapping) refused."""
    trace_b64 = base64.b64encode(bytes.fromhex(TRACE)).decode()
    span_b64 = base64.b64encode(bytes.fromhex("2222222222222222")).decode()
    export(hotspan_server, body(span(traceId=trace_b64, spanId=span_b64)))
    assert [r["SpanId"] for r in stored(hotspan_server)] == ["2222222222222222"]


def test_int64_as_strings_and_as_numbers(hotspan_server: RunningServer) -> None:
    """VictoriaMetrics/VictoriaTraces#134 and open-telemetry/opentelemetry-rust#1905: int64 fields as JSON
    numbers failed; langfuse/langfuse#14068: as strings they were dropped."""
    export(
        hotspan_server,
        body(
            span(
                "1111111111111111",
                startTimeUnixNano=START,
                endTimeUnixNano=str(START + 7),
                attributes=[
                    {"key": "as_string", "value": {"intValue": "9007199254740993"}},
                    {"key": "as_number", "value": {"intValue": 42}},
                ],
            )
        ),
    )
    (row,) = stored(hotspan_server)
    assert row["Duration"] == 7
    assert dict(row["SpanAttributes"]) == {"as_string": "9007199254740993", "as_number": "42"}


def test_a_1_mb_attribute_value_is_truncated_and_marked(hotspan_server: RunningServer) -> None:
    """grafana/tempo#3985 (queriers out of memory on huge attribute values; Tempo#4335 truncates and
    marks them) and highlight/highlight#8155 (values over 10 MB failing ClickHouse writes)."""
    prompt = {"key": "prompt", "value": {"stringValue": "é" * 1_000_000}}
    answer = export(hotspan_server, body(span("2222222222222222"), span(attributes=[prompt])))
    assert int(answer["partialSuccess"].get("rejectedSpans", 0)) == 0
    assert answer["partialSuccess"]["errorMessage"].startswith(
        "1 span was over the span limits, first resourceSpans[0].scopeSpans[0].spans[1] (cut: values=1); stored cut"
    )
    rows = stored(hotspan_server)
    attributes = dict(rows[0]["SpanAttributes"])
    limit = hotspan_server.settings.max_attribute_value_chars
    assert attributes["prompt"] == "é" * limit
    assert attributes["hotspan.truncated"] == "values=1"
    assert "hotspan.truncated" not in dict(rows[1]["SpanAttributes"])


def test_protobuf_spans_over_a_limit_are_warned_about_like_json_ones(hotspan_server: RunningServer) -> None:
    """The compiled scanner answers clean protobuf requests itself; one a limit cuts is answered by the reference,
    which warns, as for JSON (never a plain 200 for a span stored cut)."""
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    resource.resource.attributes.add(key="service.name").value.string_value = "hostile"
    spans = resource.scope_spans.add().spans
    for index, (values, chars) in enumerate([(1, 10), (300, 10), (1, 70_000), (1, 10)]):
        one = spans.add(trace_id=bytes.fromhex(TRACE), span_id=bytes([index + 1]) * 8, name="pb", kind=2)
        one.start_time_unix_nano, one.end_time_unix_nano = START, START + 1000
        for key in range(values):
            one.attributes.add(key=f"k{key}").value.string_value = "x" * chars
    answer = httpx.post(
        f"{hotspan_server.base_url}/v1/traces",
        content=request.SerializeToString(),
        headers={"content-type": "application/x-protobuf"},
    )
    partial = ExportTraceServiceResponse.FromString(answer.content).partial_success
    assert (answer.status_code, partial.rejected_spans) == (200, 0)
    assert partial.error_message.startswith(
        "2 spans were over the span limits, first resourceSpans[0].scopeSpans[0].spans[1] (cut: attributes=44)"
    )
    marks = {row["SpanId"]: dict(row["SpanAttributes"]).get("hotspan.truncated") for row in stored(hotspan_server)}
    assert marks == {
        "0101010101010101": None,
        "0202020202020202": "attributes=44",
        "0303030303030303": "values=1",
        "0404040404040404": None,
    }


def test_10k_attributes_are_cut_to_the_limit_and_marked(hotspan_server: RunningServer) -> None:
    """Arize-ai/openinference#2042 raises SDK attribute limits to 10000; grafana/tempo#3985: such spans
    exhaust memory downstream."""
    many = [{"key": f"k{i}", "value": {"intValue": i}} for i in range(10_000)]
    answer = export(hotspan_server, body(span(attributes=many)))
    keep = hotspan_server.settings.max_attributes
    assert f"(cut: attributes={10_000 - keep})" in answer["partialSuccess"]["errorMessage"]
    (row,) = stored(hotspan_server)
    attributes = dict(row["SpanAttributes"])
    assert len(attributes) == keep + 1
    assert attributes[f"k{keep - 1}"] == str(keep - 1)
    assert attributes["hotspan.truncated"] == f"attributes={10_000 - keep}"


def test_a_lone_surrogate_is_stored_as_a_replacement_character(hotspan_server: RunningServer) -> None:
    """langwatch/langwatch#6078: an unpaired UTF-16 surrogate made every ClickHouse insert of the span fail."""
    raw = json.dumps(body(span(name="PLACEHOLDER"))).replace("PLACEHOLDER", "cut \\ud83d emoji").encode()
    answer = httpx.post(
        f"{hotspan_server.base_url}/v1/traces", content=raw, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 200, answer.text
    assert [r["SpanName"] for r in stored(hotspan_server)] == ["cut \ufffd emoji"]


def test_a_nul_byte_is_stored_as_is(hotspan_server: RunningServer) -> None:
    """BerriAI/litellm#21883: NUL bytes in LLM content made the database reject the row."""
    export(hotspan_server, body(span(name="a\u0000b", attributes=[{"key": "k", "value": {"stringValue": "x\u0000y"}}])))
    (row,) = stored(hotspan_server)
    assert row["SpanName"] == "a\x00b"
    assert dict(row["SpanAttributes"]) == {"k": "x\x00y"}


def test_an_array_valued_attribute_is_stored_as_json(hotspan_server: RunningServer) -> None:
    """getsentry/sentry#114552: gen_ai.response.finish_reasons (a string array) broke span details."""
    finish = {"arrayValue": {"values": [{"stringValue": "stop"}, {"stringValue": "length"}]}}
    export(hotspan_server, body(span(attributes=[{"key": "gen_ai.response.finish_reasons", "value": finish}])))
    (row,) = stored(hotspan_server)
    assert dict(row["SpanAttributes"]) == {"gen_ai.response.finish_reasons": '["stop","length"]'}


def test_a_span_that_names_itself_as_parent_is_stored_and_readable(hotspan_server: RunningServer) -> None:
    """elastic/kibana#177913 and jaegertracing/jaeger-ui#821: parent ID = span ID looped the trace view."""
    export(hotspan_server, body(span(parentSpanId="1111111111111111")))
    assert [(r["SpanId"], r["ParentSpanId"]) for r in stored(hotspan_server)] == [
        ("1111111111111111", "1111111111111111")
    ]
    answer = httpx.get(f"{hotspan_server.base_url}/api/v1/traces/{TRACE}", timeout=10)
    assert answer.status_code == 200
    assert len(answer.json()["spans"]) == 1


def test_duplicate_spans_in_one_request_keep_the_last_and_are_noted_not_rejected(hotspan_server: RunningServer) -> None:
    first = span(attributes=[{"key": "write", "value": {"stringValue": "first"}}])
    last = span(attributes=[{"key": "write", "value": {"stringValue": "last"}}], endTimeUnixNano=str(START + 9))
    answer = export(hotspan_server, body(first, last))
    assert int(answer["partialSuccess"].get("rejectedSpans", 0)) == 0
    assert (
        "1 span(s) sent again later in this request (same traceId, spanId, kind, name and start) are stored once, as "
        "their last copy: resourceSpans[0].scopeSpans[0].spans[0] as resourceSpans[0].scopeSpans[0].spans[1]"
    ) in answer["partialSuccess"]["errorMessage"]
    (row,) = stored(hotspan_server)
    assert dict(row["SpanAttributes"]) == {"write": "last"} and row["Duration"] == 9


def test_events_and_links_beyond_their_limits_are_cut_and_marked(hotspan_server: RunningServer) -> None:
    events = [{"timeUnixNano": str(START + i), "name": f"e{i}"} for i in range(300)]
    links = [{"traceId": TRACE, "spanId": f"{i + 1:016x}"} for i in range(200)]
    answer = export(hotspan_server, body(span(events=events, links=links)))
    assert "(cut: events=44,links=72)" in answer["partialSuccess"]["errorMessage"]
    counts = hotspan_server.storage.clickhouse.query_rows(
        "SELECT length(Events.Name), length(Links.SpanId), SpanAttributes['hotspan.truncated'] FROM otel_traces"
    )
    assert counts == [(256, 128, "events=44,links=72")]


def test_json_nesting_beyond_the_limit_rejects_only_that_span(hotspan_server: RunningServer) -> None:
    """Past the protobuf runtime's 100 message levels (a span attribute's value sits at level 5, each array adds 2:
    48 arrays reach 101), a JSON span would be re-encoded into bytes the inserter cannot read back."""
    value: dict = {"stringValue": "deep"}
    for _ in range(48):
        value = {"arrayValue": {"values": [value]}}
    answer = export(hotspan_server, body(span(attributes=[{"key": "deep", "value": value}]), span("2222222222222222")))
    assert int(answer["partialSuccess"]["rejectedSpans"]) == 1
    assert "nests deeper than protobuf's 100 message levels" in answer["partialSuccess"]["errorMessage"]
    assert [r["SpanId"] for r in stored(hotspan_server)] == ["2222222222222222"]


@pytest.mark.parametrize("depth", [5, 200])
def test_protobuf_nesting_is_bounded(hotspan_server: RunningServer, depth: int) -> None:
    """Nested array values in protobuf: moderate depth is stored (as JSON, through the Python
    conversion); past the protobuf runtime's recursion limit the body is refused with 400."""
    request = ExportTraceServiceRequest()
    scope_spans = request.resource_spans.add().scope_spans.add()
    one = scope_spans.spans.add()
    one.trace_id, one.span_id, one.name = bytes.fromhex(TRACE), bytes.fromhex("3333333333333333"), "nested"
    one.start_time_unix_nano, one.end_time_unix_nano = START, START + 1
    value = one.attributes.add()
    value.key = "deep"
    current = value.value
    for _ in range(depth):
        current = current.array_value.values.add()
    current.string_value = "x"
    answer = httpx.post(
        f"{hotspan_server.base_url}/v1/traces",
        content=request.SerializeToString(),
        headers={"content-type": "application/x-protobuf"},
    )
    if depth < 100:
        assert answer.status_code == 200
        assert ExportTraceServiceResponse.FromString(answer.content).partial_success.rejected_spans == 0
        (row,) = stored(hotspan_server)
        assert dict(row["SpanAttributes"])["deep"] == "[" * depth + '"x"' + "]" * depth
        assert dict(row["ResourceAttributes"]) == {}
    else:
        assert answer.status_code == 400
