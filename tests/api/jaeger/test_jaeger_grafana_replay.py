"""Client proof: the exact requests Grafana's Jaeger data source sends, replayed against a served Hotspan holding
the OpenTelemetry demo capture, and the answers read the way Grafana reads them.

Why a replay and not Jaeger UI itself: Jaeger UI's static build is not installable from the npm registry
(``npm view jaeger-ui`` lists no published version; ``@jaegertracing/jaeger-ui`` does not exist), so no test
can serve it. Grafana's data source is the other client the Jaeger API exists for; its request shapes were
read from grafana/grafana:

- frontend, ``public/app/plugins/datasource/jaeger/datasource.ts`` (+ ``components/SearchForm.tsx``,
  ``util.ts``, ``responseTransform.ts``, ``dependencyGraphTransform.ts``): query strings built by
  ``urlUtil.serializeParams`` (``encodeURIComponent``, then AngularJS-style: ``@ : $ , ;`` left plain and a
  space as ``+``), times from the dashboard range in **µs** (``ms * 1000``), ``lookback=custom``, tags typed as
  logfmt and sent as a JSON object of strings;
- backend, ``pkg/tsdb/jaeger/client.go`` (feature toggle ``jaegerBackendMigration``): Go's ``url.Values.Encode``
  (keys sorted, ``QueryEscape``), µs times, dependencies ``endTs``/``lookback`` in **ms**;
- backend API v3 client, ``pkg/tsdb/jaeger/grpc_client.go``: ``/api/v3/traces`` with the snake_case
  ``query.*`` names, and ``query.start_time_min``/``query.start_time_max`` appended **unencoded** in RFC 3339
  with the server's zone offset (so a ``+02:00`` arrives form-decoded as `` 02:00``).

Every v1 answer is validated against Jaeger's JSON model (``jaeger_support``, written from Jaeger's
``internal/uimodel``), then put through what Grafana computes from it (trace table rows via Jaeger UI's
``transformTraceData``, span rows of ``createTraceFrame``, the node graph), compared with the capture file.
v3 answers are read back with Hotspan's OTLP/JSON reader, which follows the OTLP spec, and compared too.
"""

from __future__ import annotations

import json
import urllib.parse
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from jaeger_support import (
    KINDS,
    JaegerDependency,
    JaegerEnvelope,
    JaegerTrace,
    attribute_texts,
    demo_server,
    demo_spans,
    duration_ns,
    get_raw,
    serialize_params,
    traces_with_span,
)

from collector.otlp_json import request_from_json
from hotspan.server import RunningServer

__all__ = ["demo_server"]  # the fixture, imported for pytest


def go_encode(params: dict[str, str]) -> str:
    """Go's ``url.Values.Encode``: keys sorted, ``QueryEscape``d."""
    return urllib.parse.urlencode(sorted(params.items()))


def dashboard_range_us() -> tuple[int, int]:
    """A dashboard time range around the capture, as Grafana turns it into µs (whole ms times 1000)."""
    starts = [int(s["startTimeUnixNano"]) for s in demo_spans()]
    return (min(starts) // 1_000_000 - 1) * 1000, (max(starts) // 1_000_000 + 1) * 1000


def jaeger_ui_table_row(trace: dict[str, Any]) -> dict[str, Any]:
    """What Grafana's ``createTableFrame`` shows for a trace, via Jaeger UI's ``transformTraceData``: the tree is
    built from each span's *first* reference (parent unknown → root), the trace is named after the earliest
    root's ``service: operation``; start in ms, duration in µs."""
    ids = {span["spanID"] for span in trace["spans"]}
    roots = [s for s in trace["spans"] if not s["references"] or s["references"][0]["spanID"] not in ids]
    root = min(roots, key=lambda s: s["startTime"])
    start = min(s["startTime"] for s in trace["spans"])
    end = max(s["startTime"] + s["duration"] for s in trace["spans"])
    service = trace["processes"][root["processID"]]["serviceName"]
    return {
        "traceID": trace["traceID"],
        "traceName": f"{service}: {root['operationName']}",
        "startTime": start / 1000,
        "duration": end - start,
    }


def grafana_span_rows(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """Grafana's ``createTraceFrame``/``toSpanRow``: parent = first CHILD_OF reference, times in ms."""
    return [
        {
            "spanID": span["spanID"],
            "parentSpanID": next((r["spanID"] for r in span["references"] if r["refType"] == "CHILD_OF"), None),
            "operationName": span["operationName"],
            "serviceName": trace["processes"][span["processID"]]["serviceName"],
            "startTime": span["startTime"] / 1000,
            "duration": span["duration"] / 1000,
            "logs": [log["timestamp"] / 1000 for log in span["logs"]],
        }
        for span in trace["spans"]
    ]


def test_test_datasource_services_and_operations(demo_server: RunningServer) -> None:
    # testDatasource and SearchForm: GET /api/services, then GET /api/services/<encodeURIComponent>/operations;
    # Grafana reads `data` as a string list (and sorts it).
    services = JaegerEnvelope[list[str]].model_validate(get_raw(demo_server, "/api/services").json())
    assert services.data == sorted({s["service"] for s in demo_spans()}) and services.total == 8
    for service in services.data:
        path = f"/api/services/{urllib.parse.quote(service, safe='')}/operations"
        operations = JaegerEnvelope[list[str]].model_validate(get_raw(demo_server, path).json())
        assert operations.data == sorted({s["name"] for s in demo_spans() if s["service"] == service})


def test_frontend_search_with_tags_and_durations(demo_server: RunningServer) -> None:
    # query(): GET /api/traces?service&operation&tags&minDuration&maxDuration&limit&start&end&lookback=custom,
    # empty fields left out, "All" operations left out; tags typed as logfmt, sent as a JSON object of strings.
    start, end = dashboard_range_us()
    tags = json.dumps({"http.method": "GET", "app.synthetic_request": "true"}, separators=(",", ":"))
    query = {"service": "frontend", "operation": "HTTP GET", "tags": tags, "minDuration": "1ms", "limit": 500}
    path = "/api/traces?" + serialize_params({**query, "start": start, "end": end, "lookback": "custom"})
    assert "operation=HTTP+GET" in path and "tags=%7B%22http.method%22:%22GET%22" in path
    answer = JaegerEnvelope[list[JaegerTrace]].model_validate(get_raw(demo_server, path).json())
    assert answer.data is not None and answer.errors is None

    expected = traces_with_span(
        lambda s: (
            s["service"] == "frontend"
            and s["name"] == "HTTP GET"
            and duration_ns(s) >= 1_000_000
            and attribute_texts(s).get("http.method") == "GET"
            and attribute_texts(s).get("app.synthetic_request") == "true"
        )
    )
    assert {t.traceID for t in answer.data} == expected and expected
    by_id = {t["traceId"]: t for t in _roots()}
    for trace in (t.model_dump() for t in answer.data):
        row = jaeger_ui_table_row(trace)
        root = by_id[row["traceID"]]
        assert row["traceName"] == f"{root['service']}: {root['name']}"
        assert row["startTime"] == int(root["startTimeUnixNano"]) // 1000 / 1000


def test_backend_search_go_encoded(demo_server: RunningServer) -> None:
    # pkg/tsdb/jaeger client.Search: url.Values.Encode() of service, operation, tags, minDuration, maxDuration,
    # limit, start, end (µs); no lookback.
    start, end = dashboard_range_us()
    params = {
        "service": "checkoutservice",
        "tags": json.dumps({"rpc.system": "grpc"}),
        "maxDuration": "10s",
        "limit": "1000",
        "start": str(start),
        "end": str(end),
    }
    answer = JaegerEnvelope[list[JaegerTrace]].model_validate(
        get_raw(demo_server, "/api/traces?" + go_encode(params)).json()
    )
    assert answer.data is not None
    expected = traces_with_span(
        lambda s: (
            s["service"] == "checkoutservice"
            and duration_ns(s) <= 10 * 10**9
            and attribute_texts(s).get("rpc.system") == "grpc"
        )
    )
    assert {t.traceID for t in answer.data} == expected and expected


def test_trace_by_id_and_trace_view_rows(demo_server: RunningServer) -> None:
    # query() with a trace ID: GET /api/traces/<encodeURIComponent(id)>, plus ?start=&end= (µs) when the data
    # source has "time range for trace ID queries" on; Grafana reads data[0].
    start, end = dashboard_range_us()
    spans = demo_spans()
    biggest = Counter(s["traceId"] for s in spans).most_common(1)[0][0]
    mine = {s["spanId"]: s for s in spans if s["traceId"] == biggest}
    for path in (f"/api/traces/{biggest}", f"/api/traces/{biggest.upper()}?start={start}&end={end}"):
        answer = JaegerEnvelope[list[JaegerTrace]].model_validate(get_raw(demo_server, path).json())
        assert answer.data is not None and len(answer.data) == 1
        rows = grafana_span_rows(answer.data[0].model_dump())
        assert {r["spanID"] for r in rows} == set(mine)
        for row in rows:
            span = mine[row["spanID"]]
            assert row["parentSpanID"] == (span.get("parentSpanId") or None)
            assert row["serviceName"] == span["service"] and row["operationName"] == span["name"]
            assert row["startTime"] == int(span["startTimeUnixNano"]) // 1000 / 1000
            assert row["duration"] == duration_ns(span) // 1000 / 1000
            assert row["logs"] == [int(e["timeUnixNano"]) // 1000 / 1000 for e in span.get("events", [])]


def test_dependency_graph(demo_server: RunningServer) -> None:
    # queryType "dependencyGraph": GET /api/dependencies?endTs=<ms>&lookback=<ms> (frontend and backend alike);
    # mapJaegerDependenciesResponse draws nodes = services, edges parent→child with callCount as main stat.
    start, end = dashboard_range_us()
    end_ms, lookback_ms = end // 1000, (end - start) // 1000
    answer = JaegerEnvelope[list[JaegerDependency]].model_validate(
        get_raw(demo_server, f"/api/dependencies?{serialize_params({'endTs': end_ms, 'lookback': lookback_ms})}").json()
    )
    assert answer.data is not None and answer.errors is None
    edges = {(d.parent, d.child): d.callCount for d in answer.data}
    assert edges == _file_dependencies()
    nodes = {d.parent for d in answer.data} | {d.child for d in answer.data}
    assert nodes <= {s["service"] for s in demo_spans()}


def test_backend_v3_search_and_trace(demo_server: RunningServer) -> None:
    # grpc_client.GrpcSearch: url.Values.Encode() of query.service_name, query.operation_name, query.attributes,
    # query.duration_min, query.duration_max, then "&query.start_time_min=<RFC3339Nano>&query.start_time_max=..."
    # appended unencoded: with a +02:00 offset the '+' reaches the server as a space.
    start, end = dashboard_range_us()
    zone = timezone(timedelta(hours=2))
    t_min = datetime.fromtimestamp(start / 1e6, UTC).astimezone(zone).isoformat()
    t_max = datetime.fromtimestamp(end / 1e6, UTC).astimezone(zone).isoformat()
    query = go_encode({"query.service_name": "frontend", "query.attributes": json.dumps({"http.method": "GET"})})
    path = f"/api/v3/traces?{query}&query.start_time_min={t_min}&query.start_time_max={t_max}"
    assert "+02:00" in path
    answer = get_raw(demo_server, path)
    assert answer.status_code == 200, answer.text
    spans = _read_otlp(answer.json())
    expected = traces_with_span(lambda s: s["service"] == "frontend" and attribute_texts(s).get("http.method") == "GET")
    assert {s["traceId"] for s in spans} == expected and expected

    # GrpcTrace: GET /api/v3/traces/<QueryEscape(id)>?start_time=<RFC3339Nano>&end_time=<RFC3339Nano>
    trace_id = demo_spans()[0]["traceId"]
    t_min_utc = datetime.fromtimestamp(start / 1e6, UTC).isoformat().replace("+00:00", "Z")
    answer = get_raw(demo_server, f"/api/v3/traces/{trace_id}?start_time={t_min_utc}&end_time={t_min_utc}")
    assert answer.status_code == 200, answer.text
    spans = _read_otlp(answer.json())
    file_spans = {s["spanId"]: s for s in demo_spans() if s["traceId"] == trace_id}
    assert {s["spanId"] for s in spans} == set(file_spans)
    for span in spans:
        original = file_spans[span["spanId"]]
        assert span["startTimeUnixNano"] == original["startTimeUnixNano"]
        assert span["endTimeUnixNano"] == original["endTimeUnixNano"]
        assert KINDS[span.get("kind", 0)] == KINDS[original.get("kind", 0)]


def _roots() -> list[dict[str, Any]]:
    return [s for s in demo_spans() if not s.get("parentSpanId")]


def _file_dependencies() -> dict[tuple[str, str], int]:
    """Parent→child span pairs across services, counted straight from the capture file."""
    by_id = {(s["traceId"], s["spanId"]): s for s in demo_spans()}
    counts: Counter[tuple[str, str]] = Counter()
    for span in demo_spans():
        parent = by_id.get((span["traceId"], span.get("parentSpanId", "")))
        if parent and parent["service"] != span["service"]:
            counts[(parent["service"], span["service"])] += 1
    return dict(counts)


def _read_otlp(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Spans of a v3 answer ``{"result": TracesData}``, after Hotspan's spec-following OTLP/JSON reader
    accepted every one of them (hex IDs, enum ints, int64 strings)."""
    assert set(body) == {"result"}
    request, rejections = request_from_json(body["result"])
    assert rejections == []
    assert len(request.resource_spans) == len(body["result"]["resourceSpans"])
    return [span for rs in body["result"]["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]
