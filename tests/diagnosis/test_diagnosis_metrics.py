"""Engine metrics through prometheus-api-client: against the loopback stand-in (always) and a real Prometheus
(where the ``prometheus`` binary is installed, e.g. Debian's ``apt-get install prometheus``)."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from diagnosis_support import build_all, clean_requests, otlp_request
from prometheus_standin import PrometheusStandIn
from prometheus_support import serving, wait_until

from collector.ingest import Ingestor
from diagnosis import EngineMetrics, PrometheusMetricsSource, diagnose_window
from storage.prometheus import PrometheusError
from storage.reader import ClickHouseTraceReader
from units import NS_PER_S as NS

T = 1_800_000_000.0
"""A whole second, Unix time, where the stand-in's hand-written samples start."""


def _metrics(standin: PrometheusStandIn, start_s: float, end_s: float) -> EngineMetrics:
    return PrometheusMetricsSource(standin.url).engine_metrics(int(start_s * NS), int(end_s * NS))


def test_gauges_sum_engines_and_counters_add_up_across_a_restart() -> None:
    with PrometheusStandIn() as standin:
        engine = {"model_name": "m", "engine": "0"}
        other = {"model_name": "m", "engine": "1"}
        standin.add("vllm:num_requests_waiting", engine, [(T + i, v) for i, v in enumerate([0, 2, 3, 0, 1, 0])])
        standin.add("vllm:num_requests_waiting", other, [(T + i, v) for i, v in enumerate([1, 0, 0, 0, 0, 0])])
        standin.add("vllm:kv_cache_usage_perc", engine, [(T + i, 0.2) for i in range(6)])
        standin.add("vllm:kv_cache_usage_perc", other, [(T + i, 0.1 * i) for i in range(6)])
        # The counter restarts after the third sample (an engine restart): 100 + 50 + (30 - 0) + 20.
        standin.add(
            "vllm:prefix_cache_queries_total", engine, [(T + i, v) for i, v in enumerate([0, 100, 150, 30, 50])]
        )
        standin.add("vllm:prefix_cache_hits_total", engine, [(T + i, v) for i, v in enumerate([0, 10, 10, 5, 5])])
        standin.add("vllm:prompt_tokens_total", engine, [(T + i, 40.0 * i) for i in range(6)])
        metrics = _metrics(standin, T, T + 5)
    assert metrics.source == standin.url
    waiting = metrics.num_requests_waiting
    assert waiting is not None and waiting.values.tolist() == [1, 2, 3, 0, 1, 0]
    assert waiting.share_above(0) == pytest.approx(4 / 6)
    assert metrics.kv_cache_usage is not None and metrics.kv_cache_usage.max == pytest.approx(0.5)
    assert metrics.prefix_cache_queries_tokens == 200
    assert metrics.prefix_cache_hits_tokens == 15
    assert metrics.prefix_cache_hit_share == pytest.approx(15 / 200)
    assert metrics.prompt_tokens == 200
    assert metrics.num_requests_running is None
    assert not metrics.prefix_caching_disabled


def test_caching_off_shows_as_no_lookups_while_prompts_are_processed() -> None:
    with PrometheusStandIn() as standin:
        labels = {"model_name": "m", "engine": "0"}
        standin.add("vllm:prefix_cache_queries_total", labels, [(T + i, 0.0) for i in range(4)])
        standin.add("vllm:prefix_cache_hits_total", labels, [(T + i, 0.0) for i in range(4)])
        standin.add("vllm:prompt_tokens_total", labels, [(T + i, 500.0 * i) for i in range(4)])
        metrics = _metrics(standin, T, T + 3)
    assert metrics.prefix_caching_disabled and metrics.prefix_cache_hit_share is None


def test_cpu_pressure_is_read_for_the_busiest_host() -> None:
    with PrometheusStandIn() as standin:
        name = "node_pressure_cpu_waiting_seconds_total"
        standin.add(name, {"instance": "a:9100"}, [(T + i, 0.2 * i) for i in range(5)])
        # b waited 0.9 s of every second; its exporter restarted (counter back to 0) after the third sample.
        standin.add(name, {"instance": "b:9100"}, [(T + i, v) for i, v in enumerate([10.0, 10.9, 11.8, 0.9, 1.8])])
        metrics = _metrics(standin, T, T + 4)
        quiet = _metrics(standin, T + 10, T + 20)
    assert metrics.cpu_waiting_share == pytest.approx(0.9) and metrics.cpu_waiting_instance == "b:9100"
    # Past the lookback of the last samples, every series repeats its last value: nobody waited.
    assert quiet.cpu_waiting_share == 0.0


def test_the_standin_samples_this_hosts_cpu_pressure(tmp_path: Path) -> None:
    pressure = tmp_path / "cpu"
    pressure.write_text("some avg10=50.00 avg60=40.00 avg300=30.00 total=2500000\nfull avg10=0 total=0\n")
    with PrometheusStandIn() as standin:
        assert standin.sample_cpu_pressure_every(0.05, pressure)
        name = "node_pressure_cpu_waiting_seconds_total"
        deadline = time.monotonic() + 10
        while not standin.query_range(name, time.time(), time.time(), 1.0):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        standin.stop_scraping()
        assert not standin.sample_cpu_pressure_every(0.05, tmp_path / "absent")
        (series,) = standin.query_range(name, time.time(), time.time(), 1.0)
    assert series["metric"] == {"__name__": "node_pressure_cpu_waiting_seconds_total", "instance": "localhost"}
    assert series["values"][-1][1] == "2.5"


def test_older_vllm_metric_names_are_read_when_the_new_ones_are_absent() -> None:
    with PrometheusStandIn() as standin:
        labels = {"model_name": "m"}
        standin.add("vllm:gpu_cache_usage_perc", labels, [(T, 0.7), (T + 1, 0.95)])
        standin.add("vllm:gpu_prefix_cache_queries_total", labels, [(T, 10.0), (T + 1, 110.0)])
        standin.add("vllm:gpu_prefix_cache_hits_total", labels, [(T, 0.0), (T + 1, 60.0)])
        metrics = _metrics(standin, T, T + 1)
    assert metrics.kv_cache_usage is not None and metrics.kv_cache_usage.max == 0.95
    assert metrics.prefix_cache_hit_share == pytest.approx(0.6)


def test_a_sub_second_window_still_finds_its_samples() -> None:
    with PrometheusStandIn() as standin:
        standin.add("vllm:num_requests_waiting", {"engine": "0"}, [(T, 4.0)])
        metrics = _metrics(standin, T + 0.2, T + 0.7)
    assert metrics.num_requests_waiting is not None and metrics.num_requests_waiting.max == 4


def test_failures_are_reported_as_unavailable() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{closed.getsockname()[1]}"
    with pytest.raises(PrometheusError, match="Prometheus at"):
        PrometheusMetricsSource(refused, timeout_s=2).engine_metrics(int(T * NS), int((T + 60) * NS))
    with PrometheusStandIn() as standin, pytest.raises(PrometheusError, match="404"):
        PrometheusMetricsSource(f"{standin.url}/nowhere").engine_metrics(int(T * NS), int((T + 60) * NS))


def test_a_window_diagnosis_goes_on_without_metrics_when_prometheus_fails(
    ingestor: Ingestor, reader: ClickHouseTraceReader
) -> None:
    ingestor.export(otlp_request(build_all(clean_requests())))
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{closed.getsockname()[1]}"
    report = diagnose_window(reader, tenant=None, metrics_source=PrometheusMetricsSource(refused, timeout_s=2))
    assert report.trace_count == 20 and report.metrics.startswith("unavailable: Prometheus at")
    assert [f.cause for f in report.findings] == ["tokenizer_cold_start"]


def test_a_window_diagnosis_reads_the_metrics_of_its_spans(ingestor: Ingestor, reader: ClickHouseTraceReader) -> None:
    spans = build_all(clean_requests())
    ingestor.export(otlp_request(spans))
    first, last = min(s.start for s in spans) / NS, max(s.end for s in spans) / NS
    with PrometheusStandIn() as standin:
        labels = {"model_name": "m", "engine": "0"}
        samples = [first - 1 + i for i in range(int(last - first) + 3)]
        standin.add("vllm:prefix_cache_queries_total", labels, [(t, 0.0) for t in samples])
        standin.add("vllm:prompt_tokens_total", labels, [(t, 900.0 * i) for i, t in enumerate(samples)])
        report = diagnose_window(reader, tenant=None, metrics_source=PrometheusMetricsSource(standin.url))
    assert report.metrics == "prometheus"
    assert report.findings[0].cause == "prefix_cache_unused" and "disabled" in report.findings[0].title


class _Exposition:
    """A ``/metrics`` page whose text a test changes, served on loopback."""

    def __init__(self) -> None:
        self.text = ""
        page = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = page.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def set(self, waiting: int, queries: int, hits: int, prompt: int) -> None:
        labels = '{engine="0",model_name="m"}'
        self.text = (
            "# TYPE vllm:num_requests_waiting gauge\n"
            f"vllm:num_requests_waiting{labels} {waiting}\n"
            "# TYPE vllm:prefix_cache_queries counter\n"
            f"vllm:prefix_cache_queries_total{labels} {queries}\n"
            "# TYPE vllm:prefix_cache_hits counter\n"
            f"vllm:prefix_cache_hits_total{labels} {hits}\n"
            "# TYPE vllm:prompt_tokens counter\n"
            f"vllm:prompt_tokens_total{labels} {prompt}\n"
        )


@pytest.fixture
def real_prometheus(tmp_path: Path) -> Iterator[tuple[str, _Exposition]]:
    """A real Prometheus scraping an :class:`_Exposition` every 100 ms; skipped where none is installed."""
    if shutil.which("prometheus") is None:
        pytest.skip("no prometheus binary (Debian: apt-get install prometheus); the stand-in tests still ran")
    page = _Exposition()
    page.set(0, 0, 0, 0)
    config = {
        "global": {"scrape_interval": "100ms", "scrape_timeout": "100ms"},
        "scrape_configs": [{"job_name": "vllm", "static_configs": [{"targets": [page.target]}]}],
    }
    try:
        with serving("prometheus", tmp_path, config, ["--storage.tsdb.path={workdir}/data"]) as url:
            # Ready, and scraping: Prometheus applies static targets on its discovery cycle (about 5 s).
            wait_until(lambda: _scraping(url), 30, "prometheus to scrape its target")
            yield url, page
    finally:
        page.server.shutdown()


def _scraping(url: str) -> bool:
    try:
        answer = httpx.get(f"{url}/api/v1/query", params={"query": "up"}, timeout=1).json()
    except (httpx.HTTPError, ValueError):
        return False
    return any(item["value"][1] == "1" for item in answer.get("data", {}).get("result", []))


def test_the_stand_in_answers_as_a_real_prometheus_does(real_prometheus: tuple[str, _Exposition]) -> None:
    url, page = real_prometheus
    with PrometheusStandIn() as standin:
        standin.scrape_every(f"http://{page.target}/metrics", 0.1)
        page.set(waiting=2, queries=100, hits=0, prompt=100)
        # Counters take their baseline up to a step (then a whole second) before the window: let it be state A.
        time.sleep(2.2)
        start = time.time()
        time.sleep(1.2)
        page.set(waiting=0, queries=400, hits=60, prompt=400)
        time.sleep(1.2)
        end = time.time()
        time.sleep(0.5)  # the last scrapes land
        window = (int(start * NS), int(end * NS))
        real = PrometheusMetricsSource(url).engine_metrics(*window)
        stand = PrometheusMetricsSource(standin.url).engine_metrics(*window)
    for metrics in (real, stand):
        assert metrics.prefix_cache_queries_tokens == 300
        assert metrics.prefix_cache_hits_tokens == 60
        assert metrics.prompt_tokens == 300
        assert metrics.num_requests_waiting is not None and metrics.num_requests_waiting.max == 2
    assert real.num_requests_waiting is not None and stand.num_requests_waiting is not None
    assert real.num_requests_waiting.times_s.tolist() == stand.num_requests_waiting.times_s.tolist()
