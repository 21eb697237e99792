"""The REST API, the UI's Diagnosis page and an SLO alert name the same cause for the same window, with a custom
rule table (``HOTSPAN_DIAGNOSIS_RULES``): all three diagnose through the query room (``query.diagnosis``), built
once from the server's settings (issue 15)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import diagnosis_cases as cases
import httpx
import pytest
from diagnosis_support import otlp_request, shifted

from alerts.evaluator import diagnosis_annotations
from hotspan.server import RunningServer
from testkit import dash_update_body, serve_in_process

MINUTE_NS = 60 * 1_000_000_000
TRACES = 32
"""Requests of the window: 12 with a saturated queue, 20 with slow tool-argument validation."""


@pytest.fixture
def custom_rules_server(chdb_dsn: str, tmp_path: Path) -> Iterator[RunningServer]:
    # queue_saturation, the default's top finding for this window, switched off: the next cause must lead
    # everywhere, which only holds if every reader uses the configured table.
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  queue_saturation:\n    enabled: false\n")
    server = serve_in_process(chdb_dsn, tmp_path, diagnosis_rules_path=rules)
    yield server
    server.stop()


def _api_causes(server: RunningServer) -> list[str]:
    deadline = time.monotonic() + 30
    while True:
        body = httpx.get(f"{server.base_url}/api/v1/diagnosis", timeout=30).json()
        if body["trace_count"] >= TRACES or time.monotonic() > deadline:
            return [finding["cause"] for finding in body["findings"]]
        time.sleep(0.2)


def _ui_causes(server: RunningServer, **scope: str) -> list[str]:
    dependencies = httpx.get(f"{server.base_url}/ui/_dash-dependencies", timeout=30).json()
    (dependency,) = [d for d in dependencies if "diagnosis-findings.children" in d["output"]]
    values = {"diagnosis-lookback.value": "all"} | {f"diagnosis-{key}.value": value for key, value in scope.items()}
    body = dash_update_body(dependency, values)
    answer = httpx.post(f"{server.base_url}/ui/_dash-update-component", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    cards = answer.json()["response"]["diagnosis-findings"]["children"]
    return [code["props"]["children"] for code in _components(cards, "Code")]


def _components(tree: object, kind: str) -> Iterator[dict]:
    """Every component of type ``kind`` in a Dash layout's JSON, in document order."""
    if isinstance(tree, dict):
        if tree.get("type") == kind:
            yield tree
        for value in tree.get("props", {}).values():
            yield from _components(value, kind)
    elif isinstance(tree, list):
        for item in tree:
            yield from _components(item, kind)


def test_api_ui_and_alert_name_the_same_cause_with_custom_rules(custom_rules_server: RunningServer) -> None:
    server = custom_rules_server
    spans = cases.queue_saturation(25.0) + shifted(cases.validation(3.0), traces=100, ns=MINUTE_NS)
    posted = httpx.post(
        f"{server.base_url}/v1/traces",
        content=otlp_request(spans).SerializeToString(),
        headers={"content-type": "application/x-protobuf"},
    )
    assert posted.status_code == 200, posted.text

    api = _api_causes(server)
    assert "queue_saturation" not in api and api[0] == "orchestration_cpu_hotspot", api
    assert _ui_causes(server) == api
    # The page's scope reaches the diagnosis: an operation no trace has leaves nothing to diagnose.
    assert _ui_causes(server, service="gateway", operation="no such operation") == []
    scoped = httpx.get(f"{server.base_url}/api/v1/diagnosis", params={"operation": "no such operation"}).json()
    assert scoped["trace_count"] == 0
    starts = [span.start for span in spans]
    assert server.query is not None
    alert = diagnosis_annotations(
        server.query.diagnosis, "default", "gateway", min(starts), max(span.end for span in spans)
    )
    assert alert["diagnosis"].endswith(f"[{api[0]}, warning]"), alert
