"""REST API over a served Hotspan holding the OpenTelemetry demo capture (otel-tui test data)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from cluster_kit import layout_settings

from hotspan.server import RunningServer
from testkit import TRACES, post_otlp_json_file, serve_in_process

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"


@pytest.fixture(scope="module")
def demo_server(chdb_dsn: str, layout: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One served Hotspan holding the demo capture, shared by the module's tests (they only read; a server and its
    ingest cost seconds), on each layout of the test."""
    with layout_settings(chdb_dsn, layout, "s") as where:
        server = serve_in_process(chdb_dsn, tmp_path_factory.mktemp("traces_api"), **where)
        try:
            post_otlp_json_file(server.base_url, DEMO)
            yield server
        finally:
            server.stop()


def _demo_spans() -> list[dict]:
    spans = []
    for line in DEMO.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            service = next(
                a["value"]["stringValue"] for a in rs["resource"]["attributes"] if a["key"] == "service.name"
            )
            for ss in rs["scopeSpans"]:
                spans += [dict(span, service=service) for span in ss["spans"]]
    return spans


def _get(server: RunningServer, path: str, **params: object) -> httpx.Response:
    return httpx.get(f"{server.base_url}{path}", params=params, timeout=30)


def test_services_and_operations(demo_server: RunningServer) -> None:
    services = _get(demo_server, "/api/v1/services").json()["services"]
    assert services == sorted({s["service"] for s in _demo_spans()})
    assert len(services) == 8
    operations = _get(demo_server, "/api/v1/services/frontend/operations").json()["operations"]
    expected = {
        (s["name"], {2: "Server", 3: "Client", 1: "Internal"}[s["kind"]])
        for s in _demo_spans()
        if s["service"] == "frontend"
    }
    assert {(o["name"], o["span_kind"]) for o in operations} == expected
    assert _get(demo_server, "/api/v1/services/nope/operations").json() == {"operations": []}


@pytest.mark.both_layouts
def test_search_filters_by_service_operation_duration_and_attribute(demo_server: RunningServer) -> None:
    spans = _demo_spans()
    by_service = {s["traceId"] for s in spans if s["service"] == "checkoutservice"}
    found = _get(demo_server, "/api/v1/traces", service="checkoutservice", limit=1000).json()["traces"]
    assert {t["trace_id"] for t in found} == by_service

    slow = {s["traceId"] for s in spans if int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"]) >= 50_000_000}
    found = _get(demo_server, "/api/v1/traces", min_duration_ms=50, limit=1000).json()["traces"]
    assert {t["trace_id"] for t in found} == slow and slow

    get_traces = {
        s["traceId"]
        for s in spans
        if any(a["key"] == "http.method" and a["value"].get("stringValue") == "GET" for a in s.get("attributes", []))
    }
    found = _get(demo_server, "/api/v1/traces", attr="http.method:GET", limit=1000).json()["traces"]
    assert {t["trace_id"] for t in found} == get_traces and get_traces

    assert len(_get(demo_server, "/api/v1/traces", limit=5).json()["traces"]) == 5


def test_search_sorts_and_bounds_whole_traces_over_every_match(demo_server: RunningServer) -> None:
    spans = _demo_spans()
    envelope: dict[str, tuple[int, int]] = {}
    for span in spans:
        low, high = envelope.get(span["traceId"], (2**63, 0))
        envelope[span["traceId"]] = (min(low, int(span["startTimeUnixNano"])), max(high, int(span["endTimeUnixNano"])))
    durations = {trace: high - low for trace, (low, high) in envelope.items()}
    longest = sorted(durations, key=lambda trace: (-durations[trace], trace))[:5]
    found = _get(demo_server, "/api/v1/traces", sort="longest", limit=5).json()["traces"]
    assert [t["trace_id"] for t in found] == longest
    assert [t["duration_ns"] for t in found] == [durations[trace] for trace in longest]

    # A whole-trace bound, unlike min_duration_ms, holds no trace whose spans are each shorter than it.
    bound_ms = durations[longest[2]] / 1e6
    found = _get(demo_server, "/api/v1/traces", min_trace_duration_ms=bound_ms, limit=1000).json()["traces"]
    assert {t["trace_id"] for t in found} == {trace for trace, ns in durations.items() if ns >= bound_ms * 1e6}

    refused = _get(demo_server, "/api/v1/traces", sort="longest_stage")
    assert refused.status_code == 400 and "sort by stage needs one of" in refused.text
    assert _get(demo_server, "/api/v1/traces", sort="sideways").status_code in (400, 422)


@pytest.mark.both_layouts
def test_search_summary_fields_match_the_file(demo_server: RunningServer) -> None:
    spans = _demo_spans()
    per_trace = Counter(s["traceId"] for s in spans)
    biggest = max(per_trace, key=per_trace.get)
    mine = [s for s in spans if s["traceId"] == biggest]
    start = min(int(s["startTimeUnixNano"]) for s in mine)
    summary = next(
        t
        for t in _get(demo_server, "/api/v1/traces", start_ns=start, end_ns=start + 1, limit=1000).json()["traces"]
        if t["trace_id"] == biggest
    )
    assert summary["span_count"] == per_trace[biggest]
    assert summary["start_time_unix_nano"] == start
    assert summary["duration_ns"] == max(int(s["endTimeUnixNano"]) for s in mine) - start
    assert summary["service_count"] == len({s["service"] for s in mine})
    root = next(s for s in mine if not s.get("parentSpanId"))
    assert (summary["root_service"], summary["root_name"]) == (root["service"], root["name"])


def test_trace_by_id_accepts_upper_case_and_answers_errors_in_the_envelope(
    demo_server: RunningServer,
) -> None:
    trace_id = _demo_spans()[0]["traceId"]
    spans = _get(demo_server, f"/api/v1/traces/{trace_id.upper()}").json()["spans"]
    assert {s["trace_id"] for s in spans} == {trace_id}
    missing = _get(demo_server, "/api/v1/traces/0123456789abcdef0123456789abcdef")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    bad = _get(demo_server, "/api/v1/traces/xyz")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_trace_id"
    assert _get(demo_server, "/api/v1/traces", attr="novalue").status_code == 400


@pytest.mark.parametrize(
    "window",
    [
        {"start_ns": 2**63},  # would wrap to a negative Int64 and match every trace
        {"end_ns": 10**23},
        {"start_ns": 5, "end_ns": 1},
        {"start_ns": -1},
    ],
)
def test_window_outside_int64_or_inverted_is_a_400(demo_server: RunningServer, window: dict[str, int]) -> None:
    answer = _get(demo_server, "/api/v1/traces", **window)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_parameter"
    for path in ("/api/v1/red", "/api/v1/topology"):
        assert _get(demo_server, path, **window).status_code == 400, path


@pytest.mark.parametrize(
    "hostile", ["' OR 1=1 --", "frontend'); DROP TABLE otel_traces; --", "{service:String}", "\\'"]
)
def test_filter_values_never_reach_sql_as_text(demo_server: RunningServer, hostile: str) -> None:
    for params in ({"service": hostile}, {"operation": hostile}, {"attr": f"{hostile}:{hostile}"}):
        answer = _get(demo_server, "/api/v1/traces", **params)
        assert answer.status_code == 200 and answer.json() == {"traces": []}
    assert _get(demo_server, f"/api/v1/services/{hostile}/operations").json() == {"operations": []}
    assert len(_get(demo_server, "/api/v1/services").json()["services"]) == 8


@pytest.mark.both_layouts
def test_dependencies_count_each_cross_service_call_whose_child_starts_in_the_window(
    demo_server: RunningServer,
) -> None:
    spans = _demo_spans()
    by_id = {(s["traceId"], s["spanId"]): s for s in spans}
    starts = sorted(int(s["startTimeUnixNano"]) for s in spans)
    # From the median start on: some calls have their parent before the window, which must still count.
    start_ms, end_ms = starts[len(starts) // 2] // 1_000_000, starts[-1] // 1_000_000 + 1
    start_ns, end_ns = start_ms * 1_000_000, end_ms * 1_000_000
    expected: Counter[tuple[str, str]] = Counter()
    for child in spans:
        parent = by_id.get((child["traceId"], child.get("parentSpanId", "")))
        if parent and parent["service"] != child["service"] and start_ns <= int(child["startTimeUnixNano"]) <= end_ns:
            expected[(parent["service"], child["service"])] += 1
    assert any(
        int(by_id[(s["traceId"], s["parentSpanId"])]["startTimeUnixNano"]) < start_ns
        for s in spans
        if s.get("parentSpanId")
        and (s["traceId"], s["parentSpanId"]) in by_id
        and int(s["startTimeUnixNano"]) >= start_ns
    )
    answer = _get(demo_server, "/api/dependencies", endTs=end_ms, lookback=end_ms - start_ms).json()["data"]
    assert {(d["parent"], d["child"]): d["callCount"] for d in answer} == dict(expected) and expected
