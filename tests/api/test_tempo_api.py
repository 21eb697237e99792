"""Grafana Tempo's HTTP API (``/tempo/api/...``) over the OpenTelemetry demo capture, posted through the served
OTLP/HTTP route: answer shapes field by field against Tempo's, TraceQL searches against the file's own spans.

Shapes are Tempo's (grafana/tempo ``pkg/tempopb/tempo.proto``: ``SearchResponse``, ``TraceSearchMetadata``,
``SpanSet``, ``Span``, ``SearchTagsV2Response``, ``SearchTagValuesV2Response``, ``Trace`` with ``batches``,
``TraceByIDResponse``; proto3 JSON, so uint64 fields are strings) and as Tempo's API docs record them
(https://grafana.com/docs/tempo/latest/api_docs/, "Search" and "Search tags V2" examples).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

# The Jaeger tests' served capture and file readers, shared, not copied (pytest puts only this folder on the path).
sys.path.insert(0, str(Path(__file__).parent / "jaeger"))
from jaeger_support import attribute_texts, demo_server, demo_spans, duration_ns, traces_with_span

from hotspan.server import RunningServer

__all__ = ["demo_server"]  # the fixture, imported for pytest

ERROR = 2
SERVER = 2
WINDOW = {"start": "0", "end": "4102444800"}

# Tempo's API docs, "Search", example answer (trimmed to one trace): the keys and JSON types Grafana reads.
RECORDED_SEARCH = {
    "traces": [
        {
            "traceID": "2f3e0cee77ae5dc9c17ade3689eb2e54",
            "rootServiceName": "shop-backend",
            "rootTraceName": "update-billing",
            "startTimeUnixNano": "1684778327699392724",
            "durationMs": 557,
            "spanSets": [
                {
                    "spans": [
                        {
                            "spanID": "563d623c76514f8e",
                            "startTimeUnixNano": "1684778327735077898",
                            "durationNanos": "446979497",
                        }
                    ],
                    "matched": 1,
                }
            ],
        }
    ],
    "metrics": {"totalBlocks": 13},
}


def get(server: RunningServer, path: str, headers: dict[str, str] | None = None, **params: Any) -> httpx.Response:
    return httpx.get(f"{server.base_url}/tempo{path}", params=params, headers=headers, timeout=60)


def search_ids(server: RunningServer, q: str, **params: Any) -> set[str]:
    answer = get(server, "/api/search", q=q, limit="1000", **WINDOW, **params)
    assert answer.status_code == 200, answer.text
    return {trace["traceID"] for trace in answer.json()["traces"]}


def _parents() -> dict[tuple[str, str], str]:
    return {(s["traceId"], s["spanId"]): s.get("parentSpanId", "") for s in demo_spans()}


def _below(span: dict[str, Any], ancestor: Any) -> bool:
    """Whether a span of the file has an ancestor for which ``ancestor`` holds (by parent IDs)."""
    spans = {(s["traceId"], s["spanId"]): s for s in demo_spans()}
    parent = span.get("parentSpanId", "")
    seen = set()
    while parent and (span["traceId"], parent) in spans and parent not in seen:
        seen.add(parent)
        above = spans[(span["traceId"], parent)]
        if ancestor(above):
            return True
        parent = above.get("parentSpanId", "")
    return False


def _same_type(recorded: Any, answered: Any, path: str = "") -> None:
    """Every key of ``recorded`` is in ``answered`` with the same JSON type, recursively."""
    if isinstance(recorded, dict):
        assert isinstance(answered, dict), path
        for key, value in recorded.items():
            assert key in answered, f"{path}.{key} missing"
            _same_type(value, answered[key], f"{path}.{key}")
    elif isinstance(recorded, list):
        assert isinstance(answered, list) and answered, path
        _same_type(recorded[0], answered[0], f"{path}[0]")
    else:
        assert type(answered) is type(recorded), f"{path}: {type(answered)} for {type(recorded)}"


def test_echo_and_buildinfo(demo_server: RunningServer) -> None:
    echo = get(demo_server, "/api/echo")
    assert (echo.status_code, echo.text) == (200, "echo")
    info = get(demo_server, "/api/status/buildinfo").json()
    assert set(info) == {"version", "revision", "branch", "buildUser", "buildDate", "goVersion"}
    assert info["version"].startswith("2.7.0")


def test_search_answers_tempos_shape(demo_server: RunningServer) -> None:
    answer = get(demo_server, "/api/search", q='{ resource.service.name = "frontend" }', **WINDOW).json()
    _same_type({"traces": RECORDED_SEARCH["traces"]}, answer)
    assert set(answer["metrics"]) <= {"inspectedTraces", "inspectedBytes", "totalBlocks", "completedJobs", "totalJobs"}
    spans = {(s["traceId"], s["spanId"]): s for s in demo_spans()}
    for trace in answer["traces"]:
        assert set(trace) == {
            "traceID",
            "rootServiceName",
            "rootTraceName",
            "startTimeUnixNano",
            "durationMs",
            "spanSet",
            "spanSets",
        }
        assert trace["spanSet"] == trace["spanSets"][0]
        in_file = [s for s in demo_spans() if s["traceId"] == trace["traceID"]]
        start = min(int(s["startTimeUnixNano"]) for s in in_file)
        end = max(int(s["endTimeUnixNano"]) for s in in_file)
        assert trace["startTimeUnixNano"] == str(start)
        assert trace["durationMs"] == (end - start) // 1_000_000
        span_set = trace["spanSet"]
        frontend = [s for s in in_file if s["service"] == "frontend"]
        assert span_set["matched"] == len(frontend)
        assert len(span_set["spans"]) == min(3, len(frontend))  # Tempo's default spss
        for span in span_set["spans"]:
            assert set(span) == {"spanID", "name", "startTimeUnixNano", "durationNanos", "attributes"}
            assert span["attributes"] == [{"key": "service.name", "value": {"stringValue": "frontend"}}]
            stored = spans[(trace["traceID"], span["spanID"])]
            assert stored["service"] == "frontend"
            assert span["name"] == stored["name"]
            assert span["startTimeUnixNano"] == stored["startTimeUnixNano"]
            assert span["durationNanos"] == str(duration_ns(stored))
    starts = [int(t["startTimeUnixNano"]) for t in answer["traces"]]
    assert starts == sorted(starts, reverse=True)
    assert len(answer["traces"]) == 20  # Tempo's default limit


@pytest.mark.parametrize(
    ("q", "predicate"),
    [
        ('{ resource.service.name = "productcatalogservice" }', lambda s: s["service"] == "productcatalogservice"),
        ('{ span.http.method = "GET" }', lambda s: attribute_texts(s).get("http.method") == "GET"),
        (
            '{ .http.method = "POST" && kind = server }',
            lambda s: attribute_texts(s).get("http.method") == "POST" and s.get("kind") == SERVER,
        ),
        ("{ span.http.status_code >= 500 }", lambda s: float(attribute_texts(s).get("http.status_code", 0)) >= 500),
        ("{ duration > 1s }", lambda s: duration_ns(s) > 1_000_000_000),
        ("{ duration <= 150us }", lambda s: duration_ns(s) <= 150_000),
        ("{ status = error }", lambda s: s.get("status", {}).get("code") == ERROR),
        (
            '{ name = "oteldemo.ProductCatalogService/GetProduct" || status = error }',
            lambda s: (
                s["name"] == "oteldemo.ProductCatalogService/GetProduct" or s.get("status", {}).get("code") == ERROR
            ),
        ),
    ],
)
def test_traceql_finds_the_files_traces(demo_server: RunningServer, q: str, predicate: Any) -> None:
    expected = traces_with_span(predicate)
    assert expected, q
    assert search_ids(demo_server, q) == expected


def test_traceql_between_spansets(demo_server: RunningServer) -> None:
    def service(name: str) -> Any:
        return lambda s: s["service"] == name

    both = traces_with_span(service("frontend")) & traces_with_span(service("productcatalogservice"))
    q = '{ resource.service.name = "frontend" } && { .service.name = "productcatalogservice" }'
    assert both and search_ids(demo_server, q) == both
    either = traces_with_span(service("adservice")) | traces_with_span(service("checkoutservice"))
    q = '{ resource.service.name = "adservice" } || { resource.service.name = "checkoutservice" }'
    assert search_ids(demo_server, q) == either
    # loadgenerator calls frontend-proxy, which calls frontend: two levels down, the walk's second step
    below = traces_with_span(lambda s: s["service"] == "frontend" and _below(s, service("loadgenerator")))
    assert below and below != traces_with_span(service("frontend"))
    q = '{ resource.service.name = "loadgenerator" } >> { resource.service.name = "frontend" }'
    answer = get(demo_server, "/api/search", q=q, limit="1000", spss="100", **WINDOW).json()
    assert {t["traceID"] for t in answer["traces"]} == below
    spans = {(s["traceId"], s["spanId"]): s for s in demo_spans()}
    for trace in answer["traces"]:  # a structural query returns the right side's spans
        assert all(spans[(trace["traceID"], s["spanID"])]["service"] == "frontend" for s in trace["spanSet"]["spans"])
    assert search_ids(demo_server, '{ resource.service.name = "productcatalogservice" } >> { }') == set()
    assert (
        search_ids(demo_server, '{ resource.service.name = "frontend" } >> { .service.name = "loadgenerator" }')
        == set()
    )


def test_tags_limit_and_durations(demo_server: RunningServer) -> None:
    tags = 'service.name="frontend-proxy" http.method=GET'
    by_tags = get(demo_server, "/api/search", tags=tags, limit="1000", **WINDOW)
    expected = traces_with_span(  # one span meets every tag, as in Tempo's tag search
        lambda s: s["service"] == "frontend-proxy" and attribute_texts(s).get("http.method") == "GET"
    )
    assert expected and {t["traceID"] for t in by_tags.json()["traces"]} == expected
    assert len(get(demo_server, "/api/search", limit="5", **WINDOW).json()["traces"]) == 5
    long = get(demo_server, "/api/search", q="{ }", minDuration="5s", limit="1000", **WINDOW).json()["traces"]
    assert long and all(t["durationMs"] >= 5000 for t in long)
    short = get(demo_server, "/api/search", q="{ }", maxDuration="2ms", limit="1000", **WINDOW).json()["traces"]
    assert short and all(t["durationMs"] <= 2 for t in short)
    assert get(demo_server, "/api/search", q="{ }", start="1", end="2").json()["traces"] == []


@pytest.mark.parametrize(
    ("q", "part"),
    [
        ("{ } | count() > 2", "pipelines"),
        ("{ .a = 1 } > { .b = 2 }", "child operator"),
        ("{ .a = 1 } ~ { .b = 2 }", "sibling"),
        ('{ .a =~ "x.*" }', "regular expressions"),
        ("{ foo = 1 }", "'foo'"),
        ('{ status = "error" }', "status compares"),
        ("{ .a = 1", "expected '}'"),
        ("rate()", "expected '{'"),
        ("{ } && " * 40 + "{ }", "query too large"),
        ("(" * 40 + "{ }" + ")" * 40, "too deep"),
    ],
)
def test_unsupported_traceql_is_a_400_naming_the_part(demo_server: RunningServer, q: str, part: str) -> None:
    answer = get(demo_server, "/api/search", q=q)
    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("text/plain")
    assert answer.text.startswith("invalid TraceQL query: ") and part in answer.text


def test_trace_by_id_v1_v2_json_and_protobuf(demo_server: RunningServer) -> None:
    trace_id = max(traces_with_span(lambda s: True), key=lambda t: sum(s["traceId"] == t for s in demo_spans()))
    in_file = {s["spanId"]: s for s in demo_spans() if s["traceId"] == trace_id}
    v1 = get(demo_server, f"/api/traces/{trace_id}").json()
    assert set(v1) == {"batches"}
    v2 = get(demo_server, f"/api/v2/traces/{trace_id}").json()
    assert set(v2) == {"trace"} and v2["trace"] == {"resourceSpans": v1["batches"]}
    answered = [span for rs in v1["batches"] for ss in rs["scopeSpans"] for span in ss["spans"]]
    assert {s["spanId"] for s in answered} == set(in_file)
    for span in answered:
        stored = in_file[span["spanId"]]
        assert span["traceId"] == trace_id and span["name"] == stored["name"]
        assert span["startTimeUnixNano"] == stored["startTimeUnixNano"]
        assert span["endTimeUnixNano"] == stored["endTimeUnixNano"]
    protobuf = {"accept": "application/protobuf"}
    raw = get(demo_server, f"/api/traces/{trace_id}", headers=protobuf)
    assert raw.headers["content-type"] == "application/protobuf"
    decoded = TracesData.FromString(raw.content)  # tempopb.Trace: `batches` is field 1, as TracesData's
    assert {s.span_id.hex() for rs in decoded.resource_spans for ss in rs.scope_spans for s in ss.spans} == set(in_file)
    assert decoded.resource_spans[0].scope_spans[0].spans[0].trace_id.hex() == trace_id
    wrapped = get(demo_server, f"/api/v2/traces/{trace_id}", headers=protobuf).content
    assert wrapped[0] == 0x0A and wrapped.endswith(raw.content)  # TraceByIDResponse.trace, field 1
    assert get(demo_server, "/api/traces/00000000000000000000000000abcdef").status_code == 404
    assert get(demo_server, "/api/v2/traces/00000000000000000000000000abcdef").status_code == 404
    assert get(demo_server, "/api/traces/not-hex").status_code == 400


def test_tags_and_tag_values(demo_server: RunningServer) -> None:
    answer = get(demo_server, "/api/v2/search/tags", **WINDOW).json()
    scopes = {scope["name"]: scope["tags"] for scope in answer["scopes"]}
    assert list(scopes) == ["span", "resource", "intrinsic"]
    span_keys = {a["key"] for s in demo_spans() for a in s.get("attributes", [])}
    resource_keys = {a["key"] for s in demo_spans() for a in s["resource"]}
    assert set(scopes["span"]) == span_keys and scopes["span"] == sorted(scopes["span"])
    assert set(scopes["resource"]) == resource_keys | {"service.name"}
    assert scopes["intrinsic"] == ["duration", "kind", "name", "status"]
    only = get(demo_server, "/api/v2/search/tags", scope="intrinsic", **WINDOW).json()
    assert only == {"scopes": [{"name": "intrinsic", "tags": ["duration", "kind", "name", "status"]}]}
    services = get(demo_server, "/api/v2/search/tag/resource.service.name/values", **WINDOW).json()
    assert services == {
        "tagValues": [{"type": "string", "value": v} for v in sorted({s["service"] for s in demo_spans()})]
    }
    methods = get(demo_server, "/api/v2/search/tag/span.http.method/values", **WINDOW).json()["tagValues"]
    assert {m["value"] for m in methods} == {
        attribute_texts(s)["http.method"] for s in demo_spans() if "http.method" in attribute_texts(s)
    }
    statuses = get(demo_server, "/api/v2/search/tag/status/values", **WINDOW).json()["tagValues"]
    assert {"type": "keyword", "value": "error"} in statuses
    assert get(demo_server, "/api/v2/search/tags", scope="event").status_code == 400


def test_v1_tags_and_tag_values_are_unscoped(demo_server: RunningServer) -> None:
    # Grafana asks Tempo's v1 routes when the v2 ones fail: names of span and resource attributes together,
    # values as plain strings from either.
    names = get(demo_server, "/api/search/tags", **WINDOW).json()["tagNames"]
    span_keys = {a["key"] for s in demo_spans() for a in s.get("attributes", [])}
    resource_keys = {a["key"] for s in demo_spans() for a in s["resource"]}
    assert names == sorted(span_keys | resource_keys | {"service.name"})
    services = get(demo_server, "/api/search/tag/service.name/values", **WINDOW).json()
    assert services == {"tagValues": sorted({s["service"] for s in demo_spans()})}
    methods = get(demo_server, "/api/search/tag/http.method/values", **WINDOW).json()["tagValues"]
    assert set(methods) == {
        attribute_texts(s)["http.method"] for s in demo_spans() if "http.method" in attribute_texts(s)
    }
    assert get(demo_server, f"/api/search/tag/{'x' * 600}/values").status_code == 400
