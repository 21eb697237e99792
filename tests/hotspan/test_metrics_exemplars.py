"""``GET /metrics`` (hotspan.metrics) negotiates the format as Prometheus scrapes: OpenMetrics with trace-ID
exemplars on the duration histograms' buckets when asked for, the classic text format without them otherwise; a
real Prometheus with exemplar storage scrapes those exemplars, and each names a trace Hotspan stored."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families
from prometheus_support import running_prometheus, wait_until

from hotspan.server import RunningServer
from testkit import TRACES, post_otlp_json_file, serve_in_process

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
OPENMETRICS = "application/openmetrics-text; version=1.0.0"
HISTOGRAMS = {
    "traces_span_metrics_duration_milliseconds": {"trace_id", "span_id"},
    "traces_service_graph_request_server_seconds": {"trace_id", "span_id"},
    "traces_service_graph_request_client_seconds": {"trace_id", "span_id"},
    "hotspan_stage_duration_seconds": {"trace_id"},
}
"""The duration histograms with exemplars, and their exemplars' label names."""


@pytest.fixture(scope="module")
def served(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A served Hotspan that received the demo capture over OTLP/HTTP and analysed every trace of it (its trace
    pipeline runs 0.2 s after a trace's last span)."""
    server = serve_in_process(chdb_dsn, tmp_path_factory.mktemp("metrics"), prefix="m", trace_idle_s=0.2)
    base_url = f"http://{server.settings.host}:{server.http_port}"
    post_otlp_json_file(base_url, DEMO)
    wait_until(lambda: exemplars_by_histogram(base_url).keys() == HISTOGRAMS.keys(), 60, "every histogram's exemplars")
    yield server
    server.stop()


def url_of(server: RunningServer) -> str:
    return f"http://{server.settings.host}:{server.http_port}"


def exemplars_by_histogram(base_url: str) -> dict[str, list[dict[str, str]]]:
    """The exemplar labels on each histogram's bucket lines of an OpenMetrics scrape (histograms without any left
    out)."""
    text = httpx.get(f"{base_url}/metrics", headers={"Accept": OPENMETRICS}, timeout=10).text
    found: dict[str, list[dict[str, str]]] = {}
    for family in openmetrics_families(text):
        for sample in family.samples:
            if sample.exemplar is not None:
                assert sample.name == f"{family.name}_bucket"
                found.setdefault(family.name, []).append(sample.exemplar.labels)
    return found


def stored(base_url: str, trace_id: str) -> bool:
    return httpx.get(f"{base_url}/api/v1/traces/{trace_id}", timeout=10).status_code == 200


def test_openmetrics_scrape_has_exemplars_naming_stored_traces(served: RunningServer) -> None:
    base_url = url_of(served)
    answer = httpx.get(f"{base_url}/metrics", headers={"Accept": OPENMETRICS}, timeout=10)
    assert answer.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0")
    assert answer.text.endswith("# EOF\n")
    found = exemplars_by_histogram(base_url)
    for name, labels in HISTOGRAMS.items():
        assert {frozenset(exemplar) for exemplar in found[name]} == {frozenset(labels)}, name
    trace_ids = {exemplar["trace_id"] for exemplars in found.values() for exemplar in exemplars}
    assert len(trace_ids) > 1
    assert all(stored(base_url, trace_id) for trace_id in trace_ids)
    line = next(line for line in answer.text.splitlines() if " # {" in line)
    # An exemplar is "# {labels} value timestamp" after the bucket's count.
    assert line.startswith(tuple(f"{name}_bucket{{" for name in HISTOGRAMS))
    exemplar_value, exemplar_time = line.rsplit("} ", 1)[1].split()
    assert float(exemplar_value) >= 0
    assert abs(float(exemplar_time) - time.time()) < 3600


def test_classic_scrape_has_no_exemplars(served: RunningServer) -> None:
    answer = httpx.get(f"{url_of(served)}/metrics", timeout=10)
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "# {" not in answer.text
    assert "# EOF" not in answer.text
    names = {family.name for family in text_string_to_metric_families(answer.text)}
    assert names >= HISTOGRAMS.keys()


def test_prometheus_stores_exemplars_of_stored_traces(served: RunningServer, tmp_path: Path) -> None:
    base_url = url_of(served)
    target = f"{served.settings.host}:{served.http_port}"
    start = time.time() - 3600
    with running_prometheus(tmp_path, [target], flags=["--enable-feature=exemplar-storage"]) as prometheus:

        def exemplars() -> list[dict[str, str]]:
            answer = httpx.get(
                f"{prometheus}/api/v1/query_exemplars",
                params={
                    "query": "traces_span_metrics_duration_milliseconds_bucket",
                    "start": start,
                    "end": time.time() + 60,
                },
                timeout=10,
            ).json()
            return [exemplar["labels"] for series in answer["data"] for exemplar in series["exemplars"]]

        scraped = wait_until(exemplars, 30, "Prometheus to store the span histogram's exemplars")
    trace_ids = {labels["trace_id"] for labels in scraped}
    assert all(len(trace_id) == 32 for trace_id in trace_ids)
    assert len(trace_ids) > 1
    assert all(stored(base_url, trace_id) for trace_id in trace_ids)
