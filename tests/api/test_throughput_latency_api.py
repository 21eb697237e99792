"""``GET /api/v1/throughput-latency`` and the Throughput page of a served Hotspan, over the engine runs of
``llm_request_spans`` sent as OTLP/HTTP protobuf: the route's points, frontier, filters and errors, and the page's
callback answering over HTTP with the scatter (frontier highlighted, points labelled) and the example-trace links."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from llm_request_spans import NS, RUNS, T0, expected_point, store_runs

from hotspan.server import RunningServer
from testkit import dash_update_body, serve_in_process

WINDOW = {"start_ns": T0, "end_ns": T0 + 600 * NS}


@pytest.fixture(scope="module")
def served(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A served Hotspan holding the four runs (stored: the ingest pipeline flushed)."""
    server = serve_in_process(chdb_dsn, tmp_path_factory.mktemp("throughput"), "tl", grpc_port=-1)
    try:
        store_runs(server)
        yield server
    finally:
        server.stop()


def _get(server: RunningServer, **params: object) -> httpx.Response:
    return httpx.get(f"{server.base_url}/api/v1/throughput-latency", params=params, timeout=30)


def test_route_answers_points_with_configuration_throughput_latency_and_frontier(served: RunningServer) -> None:
    answer = _get(served, **WINDOW, bucket_s=600)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["bucket_s"], body["throughput"], body["latency"]) == (600, "requests_per_s", "e2e_p95_ms")
    points = {(p["model"], p["config"]["max_num_seqs"]): p for p in body["points"]}
    assert set(points) == {("llama-8b", "8"), ("llama-8b", "32"), ("llama-8b", "128"), ("qwen-7b", "8")}
    seqs32 = points[("llama-8b", "32")]
    assert seqs32["config"] == {
        "max_num_seqs": "32",
        "max_num_batched_tokens": "4096",
        "enable_chunked_prefill": "true",
        "enable_prefix_caching": "true",
    }
    for name, value in expected_point(RUNS[1]).items():
        assert seqs32[name] == pytest.approx(value, rel=1e-6), name
    assert seqs32["bucket_start_ns"] == T0 and len(seqs32["example_trace_ids"]) == 3
    assert {key for key, p in points.items() if p["on_frontier"]} == {("llama-8b", "32"), ("llama-8b", "128")}


def test_route_filters_by_model_and_changes_objectives(served: RunningServer) -> None:
    body = _get(served, **WINDOW, bucket_s=600, model="qwen-7b", latency="ttft_p95_ms").json()
    assert [p["model"] for p in body["points"]] == ["qwen-7b"] and body["points"][0]["on_frontier"]
    assert body["latency"] == "ttft_p95_ms"
    assert _get(served, **WINDOW, model="nope").json()["points"] == []


@pytest.mark.parametrize(
    "params",
    [
        {"bucket_s": 0},
        {"latency": "p99"},
        {"throughput": "bytes"},
        {"start_ns": T0 + 1, "end_ns": T0},
        {"start_ns": 0, "end_ns": T0, "bucket_s": 1},
    ],
)
def test_route_refuses_bad_parameters(served: RunningServer, params: dict[str, object]) -> None:
    answer = _get(served, **params)
    assert answer.status_code in (400, 422), answer.text
    assert "error" in answer.json()


def test_page_draws_the_scatter_with_the_frontier_and_links_example_traces(served: RunningServer) -> None:
    base = served.base_url
    page = httpx.get(f"{base}/ui/throughput", timeout=30)
    assert page.status_code == 200 and "/ui/_dash-component-suites/" in page.text
    dependencies = httpx.get(f"{base}/ui/_dash-dependencies", timeout=30).json()
    (dependency,) = [d for d in dependencies if "throughput-scatter.figure" in d["output"]]
    values = {"throughput-lookback.value": "all", "throughput-bucket.value": "window"}
    answer = httpx.post(f"{base}/ui/_dash-update-component", json=dash_update_body(dependency, values), timeout=60)
    assert answer.status_code == 200, answer.text
    response = answer.json()["response"]
    assert response["throughput-message"]["children"] == ""
    traces = response["throughput-scatter"]["figure"]["data"]
    labels = {trace["name"] for trace in traces}
    assert "llama-8b max_num_seqs=32 max_batched_tokens=4096 chunked_prefill=true prefix_caching=true" in labels
    (frontier,) = [trace for trace in traces if trace["name"] == "Pareto frontier"]
    assert len(frontier["x"]) == 2 and frontier["x"] == sorted(frontier["x"])
    table = str(response["throughput-table"]["children"])
    assert table.count("hs-frontier") >= 2 and "/ui/trace/" in table
    assert "?lookback=all&bucket=window" in response["throughput-url"]["search"]
