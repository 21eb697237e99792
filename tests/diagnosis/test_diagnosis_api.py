"""``GET /api/v1/diagnosis`` on a served Hotspan: spans in over OTLP/HTTP, ranked findings out."""

from __future__ import annotations

import time

import diagnosis_cases as cases
import httpx
from diagnosis_support import T0, SpanSpec, build_all, clean_requests, otlp_request, shifted, trace_id

from hotspan.server import RunningServer

PROTOBUF = {"content-type": "application/x-protobuf"}
MINUTE = 60 * 1_000_000_000


def _diagnose(server: RunningServer, expected_traces: int, **params: object) -> dict:
    """The diagnosis once the pipeline has stored ``expected_traces`` traces of the window (ingest is async)."""
    deadline = time.monotonic() + 30
    while True:
        response = httpx.get(f"{server.base_url}/api/v1/diagnosis", params=params, timeout=30)
        assert response.status_code == 200, response.text
        body = response.json()
        if body["trace_count"] >= expected_traces or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


def _post(server: RunningServer, spans: list[SpanSpec]) -> None:
    request = otlp_request(spans).SerializeToString()
    posted = httpx.post(f"{server.base_url}/v1/traces", content=request, headers=PROTOBUF)
    assert posted.status_code == 200, posted.text


def test_findings_ranked_with_evidence(hotspan_server: RunningServer) -> None:
    # Two faults in one window, in different requests: a queue over a quarter of all latency (critical) and
    # 3 ms of tool argument validation per call (a warning); the tokenizer workers' first loads are info.
    _post(hotspan_server, cases.queue_saturation(25.0) + shifted(cases.validation(3.0), traces=100, ns=MINUTE))
    body = _diagnose(hotspan_server, 32)
    assert body["metrics"] == "none" and body["rule_errors"] == []
    findings = body["findings"]
    assert [(f["cause"], f["severity"]) for f in findings] == [
        ("queue_saturation", "critical"),
        ("orchestration_cpu_hotspot", "warning"),
        ("tokenizer_cold_start", "info"),
    ]
    assert set(findings[0]) == {
        "cause",
        "title",
        "severity",
        "confidence",
        "evidence",
        "remedy",
        "tests",
        "latency_share",
    }
    assert findings[0]["evidence"]["queue_ms_max"] == 300.0
    assert findings[0]["latency_share"] == findings[0]["evidence"]["queue_share"] >= 0.25
    assert findings[1]["evidence"]["example_trace_ids"][0] in {trace_id(100 + i) for i in range(20)}


def test_window_and_service_filters(hotspan_server: RunningServer) -> None:
    # A clean minute, then a minute where every tokenize call reloads the tokenizer.
    _post(hotspan_server, build_all(clean_requests(10)) + shifted(cases.tokenizer_loads(True), traces=100, ns=MINUTE))
    everything = _diagnose(hotspan_server, 26)
    assert everything["findings"][0]["cause"] == "tokenizer_cold_start"
    assert everything["findings"][0]["severity"] == "warning"
    clean_minute = _diagnose(hotspan_server, 10, start_ns=T0, end_ns=T0 + MINUTE - 1)
    assert clean_minute["trace_count"] == 10
    assert {f["severity"] for f in clean_minute["findings"]} == {"info"}
    nobody = _diagnose(hotspan_server, 0, service="nobody")
    assert nobody == {"findings": [], "trace_count": 0, "metrics": "none", "rule_errors": []}
    agent = _diagnose(hotspan_server, 26, service="agent")
    assert agent["trace_count"] == 26


def test_bad_windows_are_400(hotspan_server: RunningServer) -> None:
    response = httpx.get(f"{hotspan_server.base_url}/api/v1/diagnosis", params={"start_ns": 10, "end_ns": 5})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_parameter"
    response = httpx.get(f"{hotspan_server.base_url}/api/v1/diagnosis", params={"limit": 0})
    assert response.status_code == 400 and "limit" in response.json()["error"]["message"]


def test_the_route_is_documented(hotspan_server: RunningServer) -> None:
    spec = httpx.get(f"{hotspan_server.base_url}/openapi.json").json()
    operation = spec["paths"]["/api/v1/diagnosis"]["get"]
    assert operation["operationId"] == "diagnose"
    assert {p["name"] for p in operation["parameters"]} == {"start_ns", "end_ns", "service", "operation", "limit"}
    assert "400" in operation["responses"]
