"""Jaeger query APIs v1 and v3 over a served Hotspan holding the OpenTelemetry demo capture: what each answer
holds, compared with the capture file, and bad input answered in each API's own error envelope, never a 500."""

from __future__ import annotations

import base64
from collections import Counter
from typing import Any
from urllib.parse import quote

import pytest
from jaeger_support import (
    KINDS,
    JaegerEnvelope,
    JaegerOperation,
    JaegerTrace,
    attribute_texts,
    demo_server,
    demo_spans,
    demo_window_us,
    duration_ns,
    get,
    jaeger_error,
    stored_text,
    traces_with_span,
    v3_error,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from api.jaeger.model import typed_value
from collector.attributes import value_to_string
from collector.otlp_json import request_from_json
from hotspan.server import RunningServer

__all__ = ["demo_server"]  # the fixture, imported for pytest

STATUS_TAGS = {1: "OK", 2: "ERROR"}
WINDOW_V3 = {"query.startTimeMin": "2024-10-30T00:00:00Z", "query.startTimeMax": "2024-10-31T00:00:00Z"}


def search(server: RunningServer, **params: Any) -> list[dict[str, Any]]:
    """A v1 search over the whole capture window; the answer validated against Jaeger's model."""
    start, end = demo_window_us()
    answer = get(server, "/api/traces", start=start, end=end, **{"limit": 1000, **params})
    assert answer.status_code == 200, answer.text
    envelope = JaegerEnvelope[list[JaegerTrace]].model_validate(answer.json())
    assert envelope.data is not None and envelope.total == len(envelope.data)
    return answer.json()["data"]


def test_every_trace_round_trips_times_references_tags_and_logs(demo_server: RunningServer) -> None:
    file_spans = {(s["traceId"], s["spanId"]): s for s in demo_spans()}
    trace_ids = sorted({trace_id for trace_id, _ in file_spans})
    answer = get(demo_server, "/api/traces", traceID=trace_ids)
    traces = JaegerEnvelope[list[JaegerTrace]].model_validate(answer.json())
    assert traces.errors is None and traces.data is not None
    assert sorted(t.traceID for t in traces.data) == trace_ids

    seen = 0
    for trace in answer.json()["data"]:
        for span in trace["spans"]:
            original = file_spans[(span["traceID"], span["spanID"])]
            seen += 1
            assert span["operationName"] == original["name"] and span["flags"] == 1
            assert span["startTime"] == int(original["startTimeUnixNano"]) // 1000
            assert span["duration"] == duration_ns(original) // 1000
            assert span["references"] == _references(original)
            assert _tag_texts(span["tags"]) == _expected_tags(original)
            for tag in span["tags"]:
                assert (tag["type"], tag["value"]) == typed_value(_text(tag))
            assert [log["timestamp"] for log in span["logs"]] == [
                int(e["timeUnixNano"]) // 1000 for e in original.get("events", [])
            ]
            assert [_tag_texts(log["fields"]) for log in span["logs"]] == [
                [("event", e["name"])] + [(a["key"], stored_text(a["value"])) for a in e.get("attributes", [])]
                for e in original.get("events", [])
            ]
            process = trace["processes"][span["processID"]]
            assert process["serviceName"] == original["service"]
            assert _tag_texts(process["tags"]) == [
                (a["key"], stored_text(a["value"])) for a in original["resource"] if a["key"] != "service.name"
            ]
    assert seen == len(file_spans)


def test_typed_tags_keep_their_original_types(demo_server: RunningServer) -> None:
    """Non-string OTLP attributes come back with their type; strings stay strings unless their text is one a
    typed value would have (the documented, unavoidable ambiguity of string storage)."""
    trace_id = next(s["traceId"] for s in demo_spans() if any("boolValue" in a["value"] for a in s["attributes"]))
    spans = {s["spanID"]: s for s in get(demo_server, f"/api/traces/{trace_id}").json()["data"][0]["spans"]}
    for original in (s for s in demo_spans() if s["traceId"] == trace_id):
        tags = {t["key"]: t for t in spans[original["spanId"]]["tags"]}
        for attribute in original.get("attributes", []):
            kind, value = next(iter(attribute["value"].items()))
            tag = tags[attribute["key"]]
            if kind == "intValue":
                assert (tag["type"], tag["value"]) == ("int64", int(value))
            elif kind == "boolValue":
                assert (tag["type"], tag["value"]) == ("bool", value)
            elif kind == "stringValue" and typed_value(value)[0] == "string":
                assert (tag["type"], tag["value"]) == ("string", value)


def test_search_filters_match_the_file(demo_server: RunningServer) -> None:
    assert {t["traceID"] for t in search(demo_server, service="checkoutservice")} == traces_with_span(
        lambda s: s["service"] == "checkoutservice"
    )
    assert {t["traceID"] for t in search(demo_server, service="frontend", operation="HTTP POST")} == traces_with_span(
        lambda s: s["service"] == "frontend" and s["name"] == "HTTP POST"
    )
    slow = traces_with_span(lambda s: s["service"] == "frontend" and 50_000_000 <= duration_ns(s) <= 2 * 10**9)
    found = search(demo_server, service="frontend", minDuration="50ms", maxDuration="2s")
    assert {t["traceID"] for t in found} == slow and slow
    by_tag = traces_with_span(
        lambda s: s["service"] == "frontend-proxy" and attribute_texts(s).get("http.status_code") == "200"
    )
    assert {t["traceID"] for t in search(demo_server, service="frontend-proxy", tag="http.status_code:200")} == by_tag
    assert {
        t["traceID"] for t in search(demo_server, service="frontend-proxy", tags='{"http.status_code":"200"}')
    } == by_tag
    # A resource attribute matches too (Jaeger matches process tags).
    sdk = traces_with_span(
        lambda s: (
            s["service"] == "frontend"
            and any(a["key"] == "telemetry.sdk.language" and stored_text(a["value"]) == "nodejs" for a in s["resource"])
        )
    )
    assert {t["traceID"] for t in search(demo_server, service="frontend", tag="telemetry.sdk.language:nodejs")} == sdk


def test_derived_tags_filter_on_status_and_kind(demo_server: RunningServer) -> None:
    errors = traces_with_span(lambda s: s["service"] == "frontend" and s.get("status", {}).get("code") == 2)
    assert {t["traceID"] for t in search(demo_server, service="frontend", tag="error:true")} == errors and errors
    assert {
        t["traceID"] for t in search(demo_server, service="frontend", tags='{"otel.status_code":"ERROR"}')
    } == errors
    clients = traces_with_span(lambda s: s["service"] == "frontend" and s.get("kind") == 3)
    assert {t["traceID"] for t in search(demo_server, service="frontend", tag="span.kind:client")} == clients


def test_search_window_limit_and_order(demo_server: RunningServer) -> None:
    traces = search(demo_server, service="frontend", limit=5)
    assert len(traces) == 5
    starts = [min(span["startTime"] for span in trace["spans"]) for trace in traces]
    assert starts == sorted(starts, reverse=True)
    first = min(int(s["startTimeUnixNano"]) for s in demo_spans()) // 1000
    early = traces_with_span(
        lambda s: s["service"] == "flagd" and first <= int(s["startTimeUnixNano"]) // 1000 <= first + 5_000_000
    )
    answer = get(demo_server, "/api/traces", service="flagd", start=first, end=first + 5_000_000, limit=1000)
    assert {t["traceID"] for t in answer.json()["data"]} == early
    # No start: the window is the two days before `end` (or `lookback` before it).
    last = max(int(s["startTimeUnixNano"]) for s in demo_spans()) // 1000 + 1
    everything = get(demo_server, "/api/traces", service="flagd", end=last, limit=1000).json()["data"]
    assert {t["traceID"] for t in everything} == traces_with_span(lambda s: s["service"] == "flagd")
    assert get(demo_server, "/api/traces", service="flagd", end=last, lookback="1ms").json()["data"] == []
    assert get(demo_server, "/api/traces", service="flagd").json()["data"] == []  # now: the capture is old


def test_operations_and_trace_ids(demo_server: RunningServer) -> None:
    answer = get(demo_server, "/api/operations", service="frontend")
    operations = JaegerEnvelope[list[JaegerOperation]].model_validate(answer.json()).data
    assert operations is not None
    assert {(o.name, o.spanKind) for o in operations} == {
        (s["name"], KINDS[s.get("kind", 0)]) for s in demo_spans() if s["service"] == "frontend"
    }
    servers = get(demo_server, "/api/operations", service="frontend", spanKind="server").json()["data"]
    assert servers and all(o["spanKind"] == "server" for o in servers)
    assert get(demo_server, "/api/services/nope/operations").json()["data"] == []

    known = demo_spans()[0]["traceId"]
    missing = "0123456789abcdef0123456789abcdef"
    answer = get(demo_server, "/api/traces", traceID=[known.upper(), missing])
    body = JaegerEnvelope[list[JaegerTrace]].model_validate(answer.json())
    assert body.data is not None and [t.traceID for t in body.data] == [known]
    assert body.errors is not None and [(e.code, e.traceID) for e in body.errors] == [(404, missing)]
    short = get(demo_server, f"/api/traces/{known[16:]}")  # a 64-bit ID is zero-padded, not a match here
    assert jaeger_error(short, 404) == "trace not found"


def test_dependencies_window_and_service_filter(demo_server: RunningServer) -> None:
    start, end = demo_window_us()
    end_ms, lookback_ms = end // 1000 + 1, (end - start) // 1000 + 2
    links = get(demo_server, "/api/dependencies", endTs=end_ms, lookback=lookback_ms).json()["data"]
    pairs = Counter()
    by_id = {(s["traceId"], s["spanId"]): s for s in demo_spans()}
    for span in demo_spans():
        parent = by_id.get((span["traceId"], span.get("parentSpanId", "")))
        if parent and parent["service"] != span["service"]:
            pairs[(parent["service"], span["service"])] += 1
    assert {(d["parent"], d["child"]): d["callCount"] for d in links} == dict(pairs)
    flagd = get(demo_server, "/api/dependencies", endTs=end_ms, lookback=lookback_ms, service="flagd").json()["data"]
    assert flagd and all("flagd" in (d["parent"], d["child"]) for d in flagd)
    assert get(demo_server, "/api/dependencies", endTs=start // 1000 - 1, lookback=1000).json()["data"] == []


def test_v3_services_operations_and_trace_round_trip(demo_server: RunningServer) -> None:
    assert get(demo_server, "/api/v3/services").json() == {"services": sorted({s["service"] for s in demo_spans()})}
    operations = get(demo_server, "/api/v3/operations", service="frontend", spanKind="client").json()["operations"]
    assert {o["name"] for o in operations} == {
        s["name"] for s in demo_spans() if s["service"] == "frontend" and s["kind"] == 3
    }
    assert get(demo_server, "/api/v3/operations", service="frontend", span_kind="client").json()["operations"] == (
        operations
    )

    trace_id = Counter(s["traceId"] for s in demo_spans()).most_common(1)[0][0]
    base64_id = base64.b64encode(bytes.fromhex(trace_id)).decode()
    for path in (f"/api/v3/traces/{trace_id}", f"/api/v3/traces/{base64_id}"):
        result = get(demo_server, path).json()["result"]
        request, rejections = request_from_json(result)
        assert rejections == []
        spans = {
            span.span_id.hex(): (rs, ss, span)
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        }
        originals = [s for s in demo_spans() if s["traceId"] == trace_id]
        assert set(spans) == {s["spanId"] for s in originals}
        for original in originals:
            rs, ss, span = spans[original["spanId"]]
            assert span.parent_span_id.hex() == original.get("parentSpanId", "")
            assert (span.name, span.kind, span.status.code) == (
                original["name"],
                original.get("kind", 0),
                original.get("status", {}).get("code", 0),
            )
            assert span.start_time_unix_nano == int(original["startTimeUnixNano"])
            assert span.end_time_unix_nano == int(original["endTimeUnixNano"])
            assert {a.key: _proto_text(a.value) for a in span.attributes} == attribute_texts(original)
            assert [(e.time_unix_nano, e.name) for e in span.events] == [
                (int(e["timeUnixNano"]), e["name"]) for e in original.get("events", [])
            ]
            assert [(link.trace_id.hex(), link.span_id.hex()) for link in span.links] == [
                (link["traceId"], link["spanId"]) for link in original.get("links", [])
            ]
            assert {a.key: _proto_text(a.value) for a in rs.resource.attributes} == {
                a["key"]: stored_text(a["value"]) for a in original["resource"]
            }
            assert (ss.scope.name, ss.scope.version) == (
                original["scope"].get("name", ""),
                original["scope"].get("version", ""),
            )


def test_v3_search_names_depth_and_not_found(demo_server: RunningServer) -> None:
    canonical = {
        "query.serviceName": "frontend",
        "query.operationName": "HTTP GET",
        "query.durationMin": "1ms",
        "query.attributes": '{"http.method":"GET"}',
        **WINDOW_V3,
    }
    snake = {
        "query.service_name": "frontend",
        "query.operation_name": "HTTP GET",
        "query.duration_min": "1ms",
        "query.attributes": '{"http.method":"GET"}',
        "query.start_time_min": WINDOW_V3["query.startTimeMin"],
        "query.start_time_max": WINDOW_V3["query.startTimeMax"],
    }
    expected = traces_with_span(
        lambda s: (
            s["service"] == "frontend"
            and s["name"] == "HTTP GET"
            and duration_ns(s) >= 1_000_000
            and attribute_texts(s).get("http.method") == "GET"
        )
    )
    for params in (canonical, snake):
        result = get(demo_server, "/api/v3/traces", **params).json()["result"]
        trace_ids = [
            span["traceId"] for rs in result["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]
        ]
        assert set(trace_ids) == expected and expected
        # A resourceSpans entry belongs to one trace, as in Jaeger's answer.
        for rs in result["resourceSpans"]:
            assert len({span["traceId"] for ss in rs["scopeSpans"] for span in ss["spans"]}) == 1
    for depth_name in ("query.searchDepth", "query.search_depth", "query.num_traces"):
        result = get(demo_server, "/api/v3/traces", **{"query.serviceName": "frontend", depth_name: "2", **WINDOW_V3})
        ids = {
            span["traceId"] for rs in result.json()["result"]["resourceSpans"] for span in rs["scopeSpans"][0]["spans"]
        }
        assert len(ids) == 2
    nothing = get(demo_server, "/api/v3/traces", **{"query.serviceName": "nope", **WINDOW_V3})
    assert v3_error(nothing, 404) == "No traces found"
    assert v3_error(get(demo_server, "/api/v3/traces/0123456789abcdef0123456789abcdef"), 404) == "No traces found"


HOSTILE = ["' OR 1=1 --", "x'); DROP TABLE otel_traces; --", "{service:String}", "\\'", "\x00", "é" * 3, "%00"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "parameter 'service' is required"),
        ({"service": "frontend", "limit": "0"}, "limit must be between"),
        ({"service": "frontend", "limit": "abc"}, "unable to parse param 'limit'"),
        ({"service": "frontend", "limit": "9" * 30}, "limit"),
        ({"service": "frontend", "start": "1.5"}, "unable to parse param 'start'"),
        ({"service": "frontend", "start": "20", "end": "10"}, "start time must be before end time"),
        ({"service": "frontend", "minDuration": "10"}, "unable to parse param 'minDuration'"),
        ({"service": "frontend", "maxDuration": "1d"}, "unable to parse param 'maxDuration'"),
        ({"service": "frontend", "minDuration": "-1s"}, "must not be negative"),
        ({"service": "frontend", "minDuration": "2s", "maxDuration": "1s"}, "'maxDuration' should be greater"),
        ({"service": "frontend", "minDuration": "9999999999h"}, "overflows"),
        ({"service": "frontend", "tag": "novalue"}, "expecting key:value"),
        ({"service": "frontend", "tags": "{not json"}, "cannot unmarshal JSON"),
        ({"service": "frontend", "tags": '{"a": 1}'}, "cannot unmarshal JSON"),
        ({"service": "frontend", "tags": "[" * 3_000}, "cannot unmarshal JSON"),
        ({"service": "frontend", "lookback": "forever"}, "lookback"),
        ({"traceID": "xyz"}, "neither hex nor base64"),
    ],
)
def test_v1_bad_input_is_a_400_in_jaegers_envelope(
    demo_server: RunningServer, params: dict[str, str], message: str
) -> None:
    assert message in jaeger_error(get(demo_server, "/api/traces", **params), 400)


def test_v1_bad_input_elsewhere_and_hostile_values(demo_server: RunningServer) -> None:
    assert "neither hex nor base64" in jaeger_error(get(demo_server, "/api/traces/xyz"), 400)
    assert "raw" in jaeger_error(get(demo_server, "/api/traces/0123456789abcdef", raw="maybe"), 400)
    assert "service" in jaeger_error(get(demo_server, "/api/operations"), 400)
    assert "lookback" in jaeger_error(get(demo_server, "/api/dependencies", lookback=-1), 400)
    assert "endTs" in jaeger_error(get(demo_server, "/api/dependencies", endTs="soon"), 400)
    # Extreme but well-formed values are clamped to what the store holds, not failed on.
    assert get(demo_server, "/api/dependencies", endTs=2**62, lookback=2**62).status_code == 200
    assert get(demo_server, "/api/traces", service="frontend", start=-(2**62), end=2**62).status_code == 200
    for hostile in HOSTILE:
        for params in (
            {"service": hostile},
            {"service": "frontend", "operation": hostile},
            {"service": hostile, "tag": f"{hostile}:{hostile}"},
            {"service": "frontend", "tags": f'{{"{hostile}": "x"}}'},
        ):
            answer = get(demo_server, "/api/traces", **params)
            assert answer.status_code in (200, 400), answer.text
            if answer.status_code == 200:
                assert answer.json()["data"] == []
        assert get(demo_server, f"/api/services/{quote(hostile, safe='')}/operations").json()["data"] == []
        assert get(demo_server, "/api/operations", service=hostile, spanKind=hostile).json()["data"] == []
    assert len(get(demo_server, "/api/services").json()["data"]) == 8


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "query.startTimeMin and query.startTimeMax are required"),
        ({"query.startTimeMin": "yesterday", "query.startTimeMax": "2030-01-01T00:00:00Z"}, "query.startTimeMin"),
        ({"query.start_time_min": "2024-10-30", "query.startTimeMax": "2030-01-01T00:00:00Z"}, "query.start_time_min"),
        ({**WINDOW_V3, "query.durationMin": "fast"}, "query.durationMin"),
        ({**WINDOW_V3, "query.duration_max": "-3s"}, "query.duration_max"),
        ({**WINDOW_V3, "query.durationMin": "2s", "query.durationMax": "1s"}, "should be greater"),
        ({**WINDOW_V3, "query.searchDepth": "-1"}, "query.searchDepth"),
        ({**WINDOW_V3, "query.num_traces": "9" * 40}, "query.num_traces"),
        ({**WINDOW_V3, "query.attributes": '{"a": ["b"]}'}, "query.attributes"),
        ({**WINDOW_V3, "query.rawTraces": "maybe"}, "query.rawTraces"),
        ({**WINDOW_V3, "query.filter": '{"op":"eq"}'}, "query.filter"),
        ({"query.startTimeMin": "2030-01-01T00:00:00Z", "query.startTimeMax": "2020-01-01T00:00:00Z"}, "before"),
    ],
)
def test_v3_bad_input_is_a_400_in_the_gateway_error(
    demo_server: RunningServer, params: dict[str, str], message: str
) -> None:
    assert message in v3_error(get(demo_server, "/api/v3/traces", **params), 400)


def test_v3_bad_trace_lookups(demo_server: RunningServer) -> None:
    assert "malformed parameter trace_id" in v3_error(get(demo_server, "/api/v3/traces/xyz"), 400)
    known = demo_spans()[0]["traceId"]
    assert "startTime" in v3_error(get(demo_server, f"/api/v3/traces/{known}", startTime="noon"), 400)
    assert "end_time" in v3_error(get(demo_server, f"/api/v3/traces/{known}", end_time="noon"), 400)
    assert "rawTraces" in v3_error(get(demo_server, f"/api/v3/traces/{known}", rawTraces="2"), 400)
    for hostile in HOSTILE:
        assert get(demo_server, "/api/v3/operations", service=hostile).json() == {"operations": []}
        answer = get(demo_server, "/api/v3/traces", **{"query.serviceName": hostile, **WINDOW_V3})
        assert answer.status_code == 404, answer.text


def _references(span: dict[str, Any]) -> list[dict[str, str]]:
    parent = [{"refType": "CHILD_OF", "traceID": span["traceId"], "spanID": span["parentSpanId"]}]
    links = [
        {"refType": "FOLLOWS_FROM", "traceID": ln["traceId"], "spanID": ln["spanId"]} for ln in span.get("links", [])
    ]
    return (parent if span.get("parentSpanId") else []) + links


def _expected_tags(span: dict[str, Any]) -> list[tuple[str, str]]:
    """The tags the OTel Collector's Jaeger translator writes for a file span, as (key, stored text)."""
    scope = span["scope"]
    tags = [(k, scope[f]) for k, f in (("otel.scope.name", "name"), ("otel.scope.version", "version")) if scope.get(f)]
    tags += [(a["key"], stored_text(a["value"])) for a in span.get("attributes", [])]
    kind = KINDS[span.get("kind", 0)]
    tags += [("span.kind", kind)] if kind != "unspecified" else []
    status = span.get("status", {})
    if status.get("code"):
        tags.append(("otel.status_code", STATUS_TAGS[status["code"]]))
    if status.get("code") == 2:
        tags.append(("error", "true"))
    if status.get("message"):
        tags.append(("otel.status_description", status["message"]))
    return tags


def _text(tag: dict[str, Any]) -> str:
    """A Jaeger tag's value as the text it was typed from."""
    value = tag["value"]
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def _tag_texts(tags: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(tag["key"], _text(tag)) for tag in tags]


def _proto_text(value: AnyValue) -> str:
    """An AnyValue read back from a v3 answer, as Hotspan would store it."""
    return value_to_string(value)
