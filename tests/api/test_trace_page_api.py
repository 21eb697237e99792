"""``GET /api/v1/traces/{id}/view`` (``api.trace_page``): windows of a trace's visible rows over REST, the same
kept views the trace page reads."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from analysis.stage_rules import load_stage_rules
from api import trace_page
from api.errors import install_error_handlers
from collector.ingest import Ingestor
from collector.otlp_json import request_from_json
from hotspan.importer import StoreSink, import_paths
from query.trace_view_cache import TraceViews
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader
from storage.tenancy import ALL_TENANTS
from storage.writer import ClickHouseTraceWriter
from synthetic_traces import agent_trace

TRACE = "5ca1ab1e" * 4


@pytest.fixture
def client(store: ClickHouse, reader: ClickHouseTraceReader) -> TestClient:
    ClickHouseTraceWriter(store).write(agent_trace(3_000, trace_id=TRACE))
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(trace_page.build_router(TraceViews(reader, load_stage_rules())))
    return TestClient(app)


def test_windows_of_visible_rows(client: TestClient) -> None:
    answer = client.get(f"/api/v1/traces/{TRACE}/view", params={"limit": 10})
    assert answer.status_code == 200
    body = answer.json()
    assert body["span_count"] == 2 + 149 * 20 and body["dominant_stage"] == "llm.decode"
    assert body["services"] == ["agent", "gateway", "postgres", "vllm"]
    window = body["window"]
    assert window["total"] == 3  # repeated siblings aggregated above 2,000 spans
    assert window["rows"]["count"][2] == 149
    step = window["rows"]["span"][2]
    opened = client.get(f"/api/v1/traces/{TRACE}/view", params={"opened": [step], "offset": 2, "limit": 6}).json()
    assert opened["window"]["offset"] == 2
    assert opened["window"]["rows"]["name"] == [
        "agent.step",
        "chat llama-3-8b",
        "llm_request",
        "execute_tool search",
        "SELECT documents",
        "parse_output",
    ]
    found = client.get(f"/api/v1/traces/{TRACE}/view", params={"search": "llm_request", "aggregate": False}).json()
    assert found["window"]["matches"]["count"] == 149


def test_errors(client: TestClient) -> None:
    assert client.get(f"/api/v1/traces/{'f' * 32}/view").status_code == 404
    assert client.get("/api/v1/traces/nothex/view").json()["error"]["code"] == "invalid_trace_id"
    assert client.get(f"/api/v1/traces/{TRACE}/view", params={"mode": "sideways"}).status_code == 400
    assert client.get(f"/api/v1/traces/{TRACE}/view", params={"limit": 100_000}).status_code == 400


def test_a_view_read_in_part_sums_the_whole_trace_by_operation(
    client: TestClient, reader: ClickHouseTraceReader
) -> None:
    assert client.get(f"/api/v1/traces/{TRACE}/view", params={"limit": 1}).json()["operations"] is None
    app = FastAPI()
    app.include_router(trace_page.build_router(TraceViews(reader, load_stage_rules(), max_read_spans=1_000)))
    body = TestClient(app).get(f"/api/v1/traces/{TRACE}/view", params={"limit": 1}).json()
    assert (body["span_count"], body["stored_spans"]) == (1_000, 2 + 149 * 20)
    operations = body["operations"]
    assert sum(operation["span_count"] for operation in operations) == body["stored_spans"]
    llm = next(operation for operation in operations if operation["name"] == "llm_request")
    assert llm["span_count"] == 149 and llm["service_name"] == "vllm"
    assert llm["duration_ns_max"] <= llm["duration_ns_sum"]


def test_work_started_after_its_parent_returned_is_waiting_and_repeated_ids_are_counted(
    store: ClickHouse, reader: ClickHouseTraceReader
) -> None:
    """Jaeger UI's own fixture: a producer ``send`` (100-140 µs) whose child starts at 200 µs, after it returned. The
    60 µs between is on the trace's critical path but in no span: waiting, so the totals and it make the duration.
    Then the same span sent again renamed (a re-export): stored as a second span, left out of the view and counted."""
    path = (
        Path(__file__).parents[1]
        / "realworld/shapes/jaegerui__traceWithSingleChildLongerThanParentAndStartsAfterParent.json"
    )
    assert import_paths([path], StoreSink(ClickHouseTraceWriter(store)), progress=False).rejected == 0
    trace_id = "0" * 16 + "006c3cf93508f205"
    app = FastAPI()
    app.include_router(trace_page.build_router(TraceViews(reader, load_stage_rules())))
    body = TestClient(app).get(f"/api/v1/traces/{trace_id}/view").json()
    assert body["duration_ns"] == 400_000 and body["waiting_ns"] == 60_000
    assert sum(body["stage_totals_ns"].values()) + body["waiting_ns"] == body["duration_ns"]
    assert (body["span_count"], body["stored_spans"], body["duplicate_spans"]) == (2, 2, 0)

    renamed = reader.trace(trace_id, tenant=ALL_TENANTS).filter(pl.col("name") == "send")
    request = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "service-one"}}]},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace_id,
                                "spanId": renamed["span_id"][0],
                                "name": "send (renamed)",
                                "kind": 4,
                                "startTimeUnixNano": str(renamed["start_time_unix_nano"][0]),
                                "endTimeUnixNano": str(renamed["end_time_unix_nano"][0]),
                            }
                        ]
                    }
                ],
            }
        ]
    }
    assert Ingestor(ClickHouseTraceWriter(store)).export(*request_from_json(request)).rejected == 0
    fresh = TestClient(app).get(f"/api/v1/traces/{trace_id}/view", params={"fresh": True}).json()
    assert (fresh["span_count"], fresh["stored_spans"], fresh["duplicate_spans"]) == (2, 3, 1)
