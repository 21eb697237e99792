"""The capacity score on Hotspan's ``/metrics`` (``hotspan.capacity_metrics``) and the example alerting rules."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from capacity_support import WINDOW_S, T, add_engine
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_standin import PrometheusStandIn

from hotspan.app import capacity_collector
from hotspan.settings import load_settings
from testkit import serve_in_process

RULES = Path(__file__).resolve().parents[2] / "alerts" / "capacity.rules.yml"


def _scrape(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_scores_parts_and_inputs_are_exported(tmp_path: Path) -> None:
    with PrometheusStandIn() as standin:
        add_engine(standin, {"job": "vllm", "instance": "a:8000"}, kv=0.5, waiting=1, running=4, requests=30,
                   ttft_counts=(30, 30, 30, 30, 30))  # fmt: skip
        settings = load_settings(
            data_dir=tmp_path, prometheus_url=standin.url, capacity_ttft_slo_s=1.0, capacity_window_s=WINDOW_S
        )
        registry = CollectorRegistry(auto_describe=True)
        registry.register(capacity_collector(settings, clock=lambda: T + WINDOW_S))  # the samples' minute
        samples = _scrape(registry)
    engine = (("name", "a:8000"), ("scope", "engine"), ("service", "vllm"))
    assert samples["hotspan_capacity_up", ()] == 1.0
    assert samples["hotspan_capacity_part", tuple(sorted((*engine, ("part", "queue"))))] == pytest.approx(0.75)
    assert samples["hotspan_capacity_input", tuple(sorted((*engine, ("input", "kv_cache_usage"))))] == 0.5
    # Every TTFT under 0.25 s against a 1 s SLO; no sized rate, so three parts.
    kv, queue, ttft = 1 - 0.5 / 0.95, 0.75, 1 - (0.25 * 28.5 / 30) / 1.0
    assert samples["hotspan_capacity_score", engine] == pytest.approx(100 * (kv * queue * ttft) ** (1 / 3), abs=0.05)
    assert ("hotspan_capacity_score", (("name", "vllm"), ("scope", "service"), ("service", "vllm"))) in samples


def test_an_unreachable_prometheus_reads_as_down(tmp_path: Path) -> None:
    with PrometheusStandIn() as standin:
        url = standin.url
    registry = CollectorRegistry(auto_describe=True)
    registry.register(capacity_collector(load_settings(data_dir=tmp_path, prometheus_url=url)))
    samples = _scrape(registry)
    assert samples["hotspan_capacity_up", ()] == 0.0
    assert not any(name == "hotspan_capacity_score" for name, _ in samples)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian's prometheus) is not installed")
def test_the_example_alert_rules_are_valid() -> None:
    checked = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0 and "SUCCESS: 3 rules found" in checked.stdout, checked.stdout + checked.stderr


def test_a_served_hotspan_exports_it_when_prometheus_is_configured(chdb_dsn: str, tmp_path: Path) -> None:
    with PrometheusStandIn() as standin:
        server = serve_in_process(chdb_dsn, tmp_path, prometheus_url=standin.url)
        try:
            text = httpx.get(f"{server.base_url}/metrics", timeout=30).text
        finally:
            server.stop()
    assert "hotspan_capacity_up 1.0" in text  # no engine in the stand-in: read fine, nothing to score
