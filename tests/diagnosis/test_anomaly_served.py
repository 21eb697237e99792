"""Incidents through a served Hotspan: the stored history of :mod:`anomaly_history` (steady minutes, a minute of
queue saturation, recovery) judged minute by minute by the server's anomaly loop (built as ``hotspan serve`` builds
it, with the history's clock), sent to a real Alertmanager that delivers to a webhook run by the test, listed by
``/api/v1/incidents`` and shown by the Incidents page (its callback over HTTP, and in headless Chromium).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from anomaly_history import FAULT_MINUTE, MINUTES, SETTINGS, at_end_of, history
from diagnosis_support import otlp_request
from playwright.sync_api import Browser
from prometheus_support import WebhookReceiver, running_alertmanager, wait_until

from browser_kit import TIMEOUT_MS, new_page, screenshot
from collector.ingest import Ingestor
from hotspan.app import open_anomaly_loop
from hotspan.server import RunningServer, start_server
from hotspan.settings import load_settings
from incidents.loop import ALERT_NAME
from storage.writer import ClickHouseTraceWriter
from testkit import dash_update_body


@dataclass(frozen=True)
class Served:
    server: RunningServer
    receiver: WebhookReceiver
    sent: list[list[dict[str, Any]]]
    """The alerts the loop sent after each minute."""
    fault_traces: set[str]

    @property
    def url(self) -> str:
        return self.server.base_url


@pytest.fixture(scope="module")
def served(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    workdir = tmp_path_factory.mktemp("anomaly-served")
    with WebhookReceiver() as receiver, running_alertmanager(workdir / "alertmanager", receiver.url) as alertmanager:
        settings = load_settings(
            data_dir=workdir,
            clickhouse_dsn=chdb_dsn,
            clickhouse_database=f"an_{uuid.uuid4().hex[:12]}",
            http_port=0,
            grpc_port=-1,
            # The loop is run below on the history's clock, not started on the wall clock.
            anomaly=False,
            anomaly_alertmanager_url=alertmanager,
        )
        server = start_server(settings)
        try:
            minutes = history()
            ingestor = Ingestor(ClickHouseTraceWriter(server.storage.clickhouse))
            ingestor.export_all([(otlp_request(spans), []) for spans in minutes], tenant="default")
            assert server.trace_pipeline is not None and server.query is not None
            server.trace_pipeline.run_once(force=True)
            loop = open_anomaly_loop(settings, server.query, None, server.http_port)
            loop.detector.settings = SETTINGS
            sent = [loop.run_once(at_end_of(m)) for m in range(MINUTES)]
            yield Served(server, receiver, sent, {span.trace_id for span in minutes[FAULT_MINUTE]})
        finally:
            server.stop()


def test_alertmanager_delivers_the_incident_then_its_resolution(served: Served) -> None:
    assert [alert for minute in served.sent[:FAULT_MINUTE] for alert in minute] == []
    firing = wait_until(lambda: served.receiver.with_status("firing"), 30, "a firing notification")[0]
    alert = firing["alerts"][0]
    labels = alert["labels"]
    assert labels["alertname"] == ALERT_NAME and labels["tenant"] == "default" and labels["severity"] == "critical"
    assert labels["metric"] == "p95_ms" and len(labels["incident_id"]) == 32
    annotations = alert["annotations"]
    assert "queue_saturation" in annotations["diagnosis"], annotations
    assert "llm_request p95_ms" in annotations["description"]
    assert set(annotations["example_trace_ids"].split(",")) <= served.fault_traces
    assert annotations["dashboard"] == f"{served.url}/ui/incidents?incident={labels['incident_id']}"
    resolved = wait_until(lambda: served.receiver.with_status("resolved"), 30, "a resolved notification")[0]
    assert resolved["alerts"][0]["labels"] == labels


def test_the_api_lists_filters_and_gets_incidents(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        listed = client.get("/api/v1/incidents").json()["incidents"]
        assert len(listed) == 1
        incident = listed[0]
        assert incident["status"] == "resolved" and incident["window_start_ns"] == at_end_of(FAULT_MINUTE - 1)
        assert any(f["cause"] == "queue_saturation" and f["new"] for f in incident["findings"])
        assert {s["service"] for s in incident["series"]} >= {"gateway", "agent", "vllm"}
        by_id = client.get(f"/api/v1/incidents/{incident['incident_id']}")
        assert by_id.status_code == 200 and by_id.json() == incident

        def count(**params: object) -> int:
            answer = client.get("/api/v1/incidents", params=params)
            assert answer.status_code == 200, answer.text
            return len(answer.json()["incidents"])

        assert count(status="resolved", service="vllm") == 1
        assert count(status="open") == 0 and count(service="no-such-service") == 0
        # Open during the fault minute; not yet opened before it, already resolved after recovery.
        assert count(start_ns=at_end_of(FAULT_MINUTE) - 1, end_ns=at_end_of(FAULT_MINUTE)) == 1
        assert count(end_ns=at_end_of(FAULT_MINUTE - 2)) == 0
        assert count(start_ns=at_end_of(MINUTES)) == 0
        missing = client.get(f"/api/v1/incidents/{'0' * 32}")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        assert client.get("/api/v1/incidents/not-an-id").status_code in (400, 422)
        assert client.get("/api/v1/incidents", params={"start_ns": 5, "end_ns": 1}).status_code == 400


def test_the_incidents_page_callback_lists_the_incident_and_its_detail(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        dependencies = client.get("/ui/_dash-dependencies").json()
        load = next(d for d in dependencies if "incidents-list.children" in d["output"])
        incident_id = client.get("/api/v1/incidents").json()["incidents"][0]["incident_id"]
        body = dash_update_body(load, {"incidents-lookback.value": "all", "incidents-chosen.data": incident_id})
        answer = client.post("/ui/_dash-update-component", json=body)
        assert answer.status_code == 200, answer.text
        text = json.dumps(answer.json())  # Dash escapes "/" in its answer
    assert "hs-incident-row" in text and "queue_saturation" in text and "llm.queue" in text
    assert f"/ui/incidents?lookback=all&incident={incident_id}" in text
    assert any(f"/ui/trace/{trace_id}" in text for trace_id in served.fault_traces)


@pytest.mark.ui
def test_the_incidents_page_renders_and_links_to_example_traces(browser: Browser, served: Served) -> None:
    page, errors = new_page(browser, height=1100)
    page.goto(f"{served.url}/ui/incidents?lookback=all")
    page.wait_for_selector(".hs-incident-row", timeout=TIMEOUT_MS)
    assert page.locator(".hs-incident-row").count() == 1
    page.click(".hs-incident-link")
    page.wait_for_selector(".hs-incident-detail .hs-finding", timeout=TIMEOUT_MS)
    assert "queue_saturation" in page.inner_text(".hs-incident-detail")
    example = page.locator(".hs-incident-detail .hs-example").first.get_attribute("href") or ""
    assert example.rsplit("/", 1)[-1] in served.fault_traces
    screenshot(page, "ui-incidents.png")
    assert errors == []
