"""The built-in evaluator, started by ``hotspan serve`` with an SLO file, sends an alert for a slow window to a
real Alertmanager, which delivers it to a webhook receiver run by the test; a resolved notification follows
once the window is healthy again."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_support import WebhookReceiver, running_alertmanager, server_spans, wait_until

from hotspan.server import RunningServer, start_server
from hotspan.settings import Settings, load_settings

SERVICE = "slo-gateway"
OPERATION = "POST /v1/chat"
EXTERNAL_URL = "http://hotspan.example:4318"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as hook:
        yield hook


@pytest.fixture
def alertmanager(tmp_path: Path, receiver: WebhookReceiver) -> Iterator[str]:
    with running_alertmanager(tmp_path / "alertmanager", receiver.url) as url:
        yield url


@pytest.fixture
def slo_settings(chdb_dsn: str, tmp_path: Path, alertmanager: str) -> Settings:
    """One SLO file and one store: what every query node of a deployment is given."""
    slo_file = tmp_path / "slo.yaml"
    slo_file.write_text(
        yaml.safe_dump(
            {
                "tenant": "default",
                "external_url": EXTERNAL_URL,
                "interval_s": 0.5,
                "resend_s": 5,
                "alertmanager_url": alertmanager,
                # Minute windows: the RED rollup is per minute. Burn 2 x budget 5 % = bad ratio above 10 %.
                "windows": [{"long": "2m", "short": "1m", "burn_rate": 2, "severity": "page"}],
                "slos": [
                    {
                        "name": "chat-latency",
                        "service": SERVICE,
                        "operation": OPERATION,
                        "latency": {"percentile": 95, "threshold_ms": 800},
                        "labels": {"team": "inference"},
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    return load_settings(
        data_dir=tmp_path,
        clickhouse_dsn=chdb_dsn,
        clickhouse_database=f"a_{uuid.uuid4().hex[:12]}",
        http_port=0,
        grpc_port=-1,
        alerts_path=slo_file,
    )


@pytest.fixture
def served(slo_settings: Settings) -> Iterator[RunningServer]:
    server = start_server(slo_settings)
    yield server
    server.stop()


def test_slow_window_reaches_alertmanager_webhook_then_resolves(
    served: RunningServer, receiver: WebhookReceiver
) -> None:
    assert served.slo_evaluator is not None
    now = time.time_ns()
    slow = server_spans(SERVICE, OPERATION, [2000.0] * 20, start_ns=now, seed=1)
    served.storage.writer.write(server_spans(SERVICE, OPERATION, [50.0] * 20, start_ns=now, seed=2))
    served.storage.writer.write(slow)

    firing = wait_until(lambda: receiver.with_status("firing"), 30, "a firing notification")[0]
    alert = firing["alerts"][0]
    assert alert["status"] == "firing"
    assert alert["labels"] == {
        "alertname": "HotspanSLOBurnRate",
        "slo": "chat-latency",
        "service": SERVICE,
        "operation": OPERATION,
        "severity": "page",
        "tenant": "default",
        "team": "inference",
    }
    annotations = alert["annotations"]
    assert annotations["summary"].startswith(f"{SERVICE} {OPERATION}: SLO p95 < 800 ms burning its error budget")
    assert "bad ratio 50.00% over 2m, 50.00% over 1m" in annotations["description"]
    slow_ids = set(slow.column("TraceId").to_pylist())
    examples = annotations["example_trace_ids"].split(",")
    assert examples and set(examples) <= slow_ids
    assert annotations["traces"] == f"{EXTERNAL_URL}/ui/trace/{examples[0]}"
    assert annotations["search"].startswith(f"{EXTERNAL_URL}/api/v1/traces?service={SERVICE}")
    assert firing["commonLabels"]["slo"] == "chat-latency"

    # Healthy again: enough fast requests bring the bad ratio of both windows under 10 %.
    served.storage.writer.write(server_spans(SERVICE, OPERATION, [50.0] * 2000, start_ns=time.time_ns(), seed=3))
    resolved = wait_until(lambda: receiver.with_status("resolved"), 30, "a resolved notification")[0]
    assert resolved["alerts"][0]["labels"] == alert["labels"]
    assert resolved["alerts"][0]["status"] == "resolved"
    assert served.slo_evaluator.firing() == []


def test_a_query_node_given_the_slo_file_does_not_evaluate_it(
    served: RunningServer, slo_settings: Settings, receiver: WebhookReceiver, tmp_path: Path
) -> None:
    """Query nodes scale out, the evaluator does not: it runs in the one process that owns the background work
    (``hotspan.roles.runs_slo_evaluator``; here the ``all`` node), so a burning SLO makes one alert however many
    query nodes serve."""
    query_node = start_server(slo_settings.model_copy(update={"data_dir": tmp_path / "query", "role": "query"}))
    try:
        assert query_node.slo_evaluator is None
        assert served.slo_evaluator is not None
        served.storage.writer.write(server_spans(SERVICE, OPERATION, [2000.0] * 20, start_ns=time.time_ns(), seed=1))
        firing = wait_until(lambda: receiver.with_status("firing"), 30, "a firing notification")
        assert [alert["labels"]["slo"] for notification in firing for alert in notification["alerts"]] == [
            "chat-latency"
        ]
    finally:
        query_node.stop()
