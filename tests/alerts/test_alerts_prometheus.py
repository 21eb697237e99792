"""A real Prometheus scrapes a served Hotspan's ``/metrics`` and evaluates the rules ``hotspan alerts rules``
generated: the scraped span and service-graph series match what ClickHouse holds, and the burn-rate alert
fires for an injected slow window. The same Prometheus scrapes an emulated vLLM engine, whose metrics the
Services page reads back through :class:`storage.engine_metrics.PrometheusEngineMetrics`."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
import yaml
from prometheus_api_client import PrometheusConnect
from prometheus_support import binary, running_prometheus, server_spans, serving_metrics, wait_until

from collector.batch import to_batch
from collector.otlp_json import request_from_json
from hotspan.cli import main as hotspan_main
from hotspan.server import RunningServer, start_server
from hotspan.settings import load_settings
from instrumented_stack.engine.metrics import EngineMetrics
from storage.engine_metrics import ENGINE_SERIES, PrometheusEngineMetrics
from testkit import TRACES

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
DEMO_TRACES = 141
SERVICE = "prom-gateway"
OPERATION = "POST /v1/chat"
SLO = {
    "tenant": "default",
    # Seconds-long windows so the test runs in seconds; production files use the workbook's hours.
    "windows": [{"long": "20s", "short": "5s", "burn_rate": 2, "severity": "page"}],
    "slos": [
        {
            "name": "prom-latency",
            "service": SERVICE,
            "operation": OPERATION,
            "latency": {"percentile": 95, "threshold_ms": 800},
        },
        {"name": "prom-errors", "service": SERVICE, "errors": {"max_ratio": 0.01}},
    ],
}


@pytest.fixture(scope="module")
def rules_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Rules written by ``hotspan alerts rules`` from :data:`SLO`."""
    workdir = tmp_path_factory.mktemp("rules")
    slo_file = workdir / "slo.yaml"
    slo_file.write_text(yaml.safe_dump(SLO), encoding="utf-8")
    out = workdir / "rules.yaml"
    assert hotspan_main(["alerts", "rules", str(slo_file), "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def served(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A served Hotspan whose trace pipeline analyses a trace 0.2 s after its last span."""
    settings = load_settings(
        data_dir=tmp_path_factory.mktemp("hotspan"),
        clickhouse_dsn=chdb_dsn,
        clickhouse_database=f"p_{uuid.uuid4().hex[:12]}",
        http_port=0,
        grpc_port=-1,
        trace_idle_s=0.2,
    )
    server = start_server(settings)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def engine_metrics() -> EngineMetrics:
    """The engine's metric families: 3 requests waiting, KV cache half full."""
    metrics = EngineMetrics("test-model", 4096)
    metrics.waiting.set(3)
    metrics.kv_cache_usage.set(0.5)
    return metrics


@pytest.fixture(scope="module")
def engine(engine_metrics: EngineMetrics) -> Iterator[str]:
    """The instrumented stack's vLLM metric families on loopback, moving as a busy engine's do: 3 requests
    waiting, KV cache half full, a quarter of the prefix tokens cached, TTFT around 120 ms."""
    metrics = engine_metrics
    stop = threading.Event()

    def busy() -> None:
        while not stop.wait(0.1):
            metrics.prefix_cache_queries.inc(400)
            metrics.prefix_cache_hits.inc(100)
            metrics.time_to_first_token.observe(0.12)

    thread = threading.Thread(target=busy, daemon=True)
    thread.start()
    with serving_metrics(metrics.exposition) as target:
        yield target
    stop.set()
    thread.join()


@pytest.fixture(scope="module")
def prometheus(
    served: RunningServer, engine: str, rules_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    target = f"{served.settings.host}:{served.http_port}"
    with running_prometheus(tmp_path_factory.mktemp("prometheus"), [target, engine], [rules_file]) as url:
        yield url


def test_generated_rules_pass_promtool(rules_file: Path) -> None:
    result = subprocess.run([binary("promtool"), "check", "rules", str(rules_file)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 6 rules found" in result.stdout


def demo_batch() -> pa.Table:
    """The whole demo capture as one batch: stored in one insert, every trace is complete when the pipeline
    first sees it (spans arriving after a trace's first analysis are not counted again; trace_metrics)."""
    lines = [line for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]
    return pa.concat_tables(to_batch(*request_from_json(json.loads(line))).table for line in lines)


def test_scraped_series_match_clickhouse(served: RunningServer, prometheus: str) -> None:
    served.storage.writer.write(demo_batch())
    ch = served.storage.clickhouse
    wait_until(
        lambda: ch.query_rows("SELECT count() FROM hotspan_trace_summary FINAL")[0][0] == DEMO_TRACES,
        60,
        "the trace pipeline to analyse the demo capture",
    )
    spans_by_service = dict(ch.query_rows("SELECT ServiceName, sum(Calls) FROM hotspan_red_minutes GROUP BY 1"))
    edges = {
        (client, server, kind): (int(calls), int(failed))
        for client, server, kind, calls, failed in ch.query_rows(
            "SELECT Client, Server, ConnectionType, sum(Calls), sum(Failed) FROM hotspan_service_graph_minutes"
            " GROUP BY 1, 2, 3"
        )
    }
    client = PrometheusConnect(url=prometheus, disable_ssl=True)

    def scraped(query: str, labels: tuple[str, ...]) -> dict[tuple[str, ...], int]:
        return {
            tuple(r["metric"].get(k, "") for k in labels): round(float(r["value"][1]))
            for r in client.custom_query(query)
        }

    expected_spans = {(service,): int(count) for service, count in spans_by_service.items()}
    spans = wait_until(
        lambda: (
            (s := scraped("sum by (service_name) (traces_span_metrics_calls_total)", ("service_name",)))
            == expected_spans
            and s
        ),
        30,
        f"span metrics equal to the RED rollup {expected_spans}",
    )
    assert len(spans) == 8
    histogram = scraped("sum by (service_name) (traces_span_metrics_duration_milliseconds_count)", ("service_name",))
    assert histogram == expected_spans

    connector_types = {"plain": "", "database": "database", "messaging": "messaging_system", "virtual": "virtual_node"}
    expected_calls = {(c, s, connector_types[k]): n for (c, s, k), (n, _) in edges.items()}
    expected_failed = {(c, s, connector_types[k]): f for (c, s, k), (_, f) in edges.items() if f}
    labels = ("client", "server", "connection_type")
    assert scraped("traces_service_graph_request_total", labels) == expected_calls
    assert scraped("traces_service_graph_request_failed_total", labels) == expected_failed
    server_side = scraped("traces_service_graph_request_server_seconds_count", labels)
    assert server_side[("frontend-proxy", "frontend", "")] == expected_calls[("frontend-proxy", "frontend", "")]
    assert ("frontend", "cartservice", "virtual_node") not in server_side  # a virtual peer has no server span
    # Seconds, not milliseconds: every frontend-proxy → frontend call of the capture is under 15 s.
    slow = client.custom_query(
        'traces_service_graph_request_server_seconds_bucket{client="frontend-proxy", server="frontend", le="15.0"}'
    )
    assert round(float(slow[0]["value"][1])) == expected_calls[("frontend-proxy", "frontend", "")]
    stages = scraped("sum(hotspan_stage_duration_seconds_count)", ())
    assert stages[()] > 0


def test_burn_rate_alert_fires_for_a_slow_window(served: RunningServer, prometheus: str) -> None:
    client = PrometheusConnect(url=prometheus, disable_ssl=True)
    served.storage.writer.write(server_spans(SERVICE, OPERATION, [40.0] * 20, start_ns=time.time_ns(), seed=11))
    wait_until(
        lambda: client.custom_query(f'traces_span_metrics_calls_total{{service_name="{SERVICE}"}}'),
        30,
        "the healthy requests' series in Prometheus",
    )
    time.sleep(2.5)  # two more scrapes, so the slow requests show as an increase
    assert not client.custom_query('ALERTS{alertname="HotspanSLOBurnRate", alertstate="firing"}')

    served.storage.writer.write(server_spans(SERVICE, OPERATION, [2500.0] * 20, start_ns=time.time_ns(), seed=12))
    alerts = wait_until(
        lambda: client.custom_query('ALERTS{alertname="HotspanSLOBurnRate", alertstate="firing"}'),
        30,
        "the latency burn-rate alert to fire",
    )
    labels = alerts[0]["metric"]
    assert {k: labels[k] for k in ("slo", "service", "operation", "severity", "tenant")} == {
        "slo": "prom-latency",
        "service": SERVICE,
        "operation": OPERATION,
        "severity": "page",
        "tenant": "default",
    }
    assert [a["metric"]["slo"] for a in alerts] == ["prom-latency"]  # no errors: the error SLO stays quiet
    ratio = client.custom_query('hotspan_slo:bad_ratio:rate5s{slo="prom-latency"}')
    assert float(ratio[0]["value"][1]) > 0.1


def test_engine_metrics_read_back_for_the_services_page(prometheus: str) -> None:
    reader = PrometheusEngineMetrics(prometheus, timeout_s=5.0, rate_window_s=5)

    def read() -> dict[str, float]:
        now = time.time_ns()
        frame = reader.engine_series(now - 20 * 1_000_000_000, now, 1)
        return {name: values[-1] for name, values in frame.group_by("series").agg("value").iter_rows()}

    latest = wait_until(lambda: (r := read()).keys() == set(ENGINE_SERIES) and r, 30, "every engine series")
    assert latest["waiting"] == 3
    assert latest["kv_cache_usage"] == 0.5
    assert latest["prefix_cache_hit"] == pytest.approx(0.25)
    # histogram_quantile interpolates inside the emulator's TTFT bucket that holds 120 ms: (0.1 s, 0.25 s].
    assert 0.1 < latest["ttft_p50_s"] <= 0.25


def test_a_queue_shorter_than_a_step_shows_as_the_steps_peak(prometheus: str, engine_metrics: EngineMetrics) -> None:
    # A range query samples a gauge once per step: at the Services page's minute steps, the demo's fault (a queue
    # filling and draining within 8-17 s) read 0 waiting. Each step now shows the gauge's peak within it.
    reader = PrometheusEngineMetrics(prometheus, timeout_s=5.0, rate_window_s=5)

    def last_waiting(step_s: int) -> float:
        now = time.time_ns()
        frame = reader.engine_series(now - 2 * step_s * 1_000_000_000, now, step_s)
        return frame.filter(pl.col("series") == "waiting")["value"][-1]

    engine_metrics.waiting.set(9)
    try:
        wait_until(lambda: last_waiting(1) == 9, 30, "a scrape of the queue of 9")
    finally:
        engine_metrics.waiting.set(3)
    wait_until(lambda: last_waiting(1) == 3, 30, "the queue back at 3 in the 1 s steps")
    assert last_waiting(30) == 9
