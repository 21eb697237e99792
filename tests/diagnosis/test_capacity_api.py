"""``GET /api/v1/capacity`` of a served Hotspan over engine metrics in the Prometheus stand-in: per engine and per
service the score, its parts, their inputs and the weakest part, over the configured window; a Prometheus that
stops answering, or none configured, is a status in a 200 answer, never a server error."""

from __future__ import annotations

import math
from pathlib import Path

import httpx
import pytest
from capacity_support import WINDOW_S, T, add_llama_pair
from prometheus_standin import PrometheusStandIn

from hotspan.server import RunningServer
from testkit import serve_in_process

END_NS = int((T + WINDOW_S) * 1e9)
"""The end of the samples' minute."""
CAPACITY = {"capacity_ttft_slo_s": 2.0, "capacity_max_rate_per_s": 2.0, "capacity_window_s": WINDOW_S}


def _get(server: RunningServer, **params: object) -> httpx.Response:
    return httpx.get(f"{server.base_url}/api/v1/capacity", params=params, timeout=30)


def test_scores_parts_and_inputs_then_a_vanished_prometheus(chdb_dsn: str, tmp_path: Path) -> None:
    server = None
    try:
        with PrometheusStandIn() as standin:
            add_llama_pair(standin)
            server = serve_in_process(chdb_dsn, tmp_path, "cap", grpc_port=-1, prometheus_url=standin.url, **CAPACITY)
            answer = _get(server, end_ns=END_NS)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert (body["status"], body["message"]) == ("ok", "")
        assert (body["start_ns"], body["end_ns"]) == (END_NS - int(WINDOW_S * 1e9), END_NS)
        assert body["settings"]["ttft_slo_s"] == 2.0 and body["settings"]["window_s"] == WINDOW_S
        engines = {entry["name"]: entry for entry in body["engines"]}
        assert list(engines) == ["a:8000/llama", "b:8000/llama"]
        healthy = engines["a:8000/llama"]
        assert healthy["service"] == "vllm-llama"
        assert healthy["inputs"] == pytest.approx(
            {
                "kv_cache_usage": 0.2,
                "requests_waiting": 0.0,
                "requests_running": 4.0,
                "request_rate_per_s": 1.0,
                "ttft_p95_seconds": 0.25 + 0.25 * 27 / 30,
            }
        )
        parts = {"kv_cache": 1 - 0.2 / 0.95, "queue": 1.0, "ttft": 1 - 0.475 / 2, "rate": 0.5}
        assert healthy["parts"] == pytest.approx(parts)
        assert healthy["score"] == pytest.approx(100 * math.prod(parts.values()) ** 0.25, abs=0.05)
        assert healthy["weakest_part"] == "rate"
        busy = engines["b:8000/llama"]
        # TTFT p95 2.425 s is over the 2 s SLO: no headroom left, the part that limits the score.
        assert busy["parts"]["ttft"] == 0.0 and busy["weakest_part"] == "ttft"
        assert busy["parts"]["kv_cache"] == pytest.approx(1 - 0.6 / 0.95)
        [service] = body["services"]
        assert (service["name"], service["service"]) == ("vllm-llama", "vllm-llama")
        assert service["inputs"]["kv_cache_usage"] == pytest.approx(0.6)  # the fullest engine's
        assert service["score"] < healthy["score"]

        # The stand-in is gone: the same question is answered, with the reason.
        gone = _get(server, end_ns=END_NS)
        assert gone.status_code == 200, gone.text
        assert gone.json()["status"] == "unavailable" and standin.url in gone.json()["message"]
        assert gone.json()["engines"] == gone.json()["services"] == []
    finally:
        if server is not None:
            server.stop()


def test_without_prometheus_the_status_says_so(chdb_dsn: str, tmp_path: Path) -> None:
    server = serve_in_process(chdb_dsn, tmp_path, "cap", grpc_port=-1)
    try:
        answer = _get(server)
        bad = _get(server, end_ns=-1)
        spec = httpx.get(f"{server.base_url}/openapi.json", timeout=30).json()
    finally:
        server.stop()
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "not_configured" and "HOTSPAN_PROMETHEUS_URL" in body["message"]
    assert body["end_ns"] - body["start_ns"] == 300 * 10**9  # the default window
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_parameter"
    route = spec["paths"]["/api/v1/capacity"]["get"]
    assert route["operationId"] == "get_capacity" and "400" in route["responses"]
