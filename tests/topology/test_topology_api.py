"""``GET /api/v1/topology``, ``/api/v1/topology/examples`` and ``/api/v1/red`` over a real embedded store holding the
OpenTelemetry demo capture, its rollups filled at ingest (RED) and by the trace pipeline (service graph)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_kit import layout_database
from fastapi import FastAPI
from fastapi.testclient import TestClient
from topology_support import demo_batch, run_pipeline, storage_of

from api import red as red_api
from api import topology as topology_api
from api.errors import install_error_handlers
from storage.clickhouse import ClickHouse
from storage.migrations import migration_files, render
from storage.rollup_reader import RedQuery
from storage.schema import SPAN_SCHEMA, with_tenant
from testkit import TRACES, query_room

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
ALL_TIME = {"start_ns": 0, "end_ns": 4_000_000_000_000_000_000}
MONTH_S = 30 * 86_400


@pytest.fixture(scope="module")
def demo_store(chdb_dsn: str, layout: str) -> Iterator[ClickHouse]:
    """One migrated database holding the demo capture, analysed; shared by the read-only tests here."""
    with layout_database(chdb_dsn, layout) as ch:
        storage = storage_of(ch)
        storage.writer.write(demo_batch(DEMO))
        run_pipeline(storage)
        yield ch


@pytest.fixture(scope="module")
def client(demo_store: ClickHouse) -> Iterator[TestClient]:
    app = FastAPI()
    install_error_handlers(app)
    room = query_room(demo_store)
    app.include_router(topology_api.build_router(room))
    app.include_router(red_api.build_router(room))
    with TestClient(app) as test_client:
        yield test_client


@pytest.mark.both_layouts
def test_topology_nodes_and_edges(client: TestClient) -> None:
    body = client.get("/api/v1/topology", params=ALL_TIME).json()
    assert body["start_ns"] == 0
    nodes = {node["id"]: node for node in body["nodes"]}
    assert nodes["frontend"] == {
        "id": "frontend",
        "kind": "service",
        "calls": 128,
        "calls_in": 128,
        "calls_out": 69,
        "errors": 40,
    }
    assert nodes["user"]["kind"] == "user" and nodes["user"]["calls"] == nodes["user"]["calls_out"] > 0
    edge = next(e for e in body["edges"] if (e["source"], e["target"]) == ("frontend-proxy", "frontend"))
    assert edge["connection_type"] == "plain"
    assert edge["calls"] == 75 and edge["errors"] == 20 and edge["error_rate"] == pytest.approx(20 / 75)
    assert edge["p50_ms"] == edge["client_p50_ms"] and 0 < edge["server_p50_ms"] <= edge["client_p50_ms"]
    assert edge["p50_ms"] <= edge["p95_ms"] <= edge["p99_ms"]
    virtual = next(e for e in body["edges"] if e["target"] == "cartservice")
    assert virtual["connection_type"] == "virtual" and virtual["server_p50_ms"] is None


def test_topology_window_and_errors(client: TestClient) -> None:
    assert client.get("/api/v1/topology", params={"start_ns": 0, "end_ns": 1}).json() == {
        "start_ns": 0,
        "end_ns": 1,
        "nodes": [],
        "edges": [],
        "overflow": None,
    }
    response = client.get("/api/v1/topology", params={"start_ns": 10, "end_ns": 5})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_parameter"
    assert client.get("/api/v1/topology", params={"start_ns": -1}).status_code == 400


def test_edge_examples_list_failed_calls_first(client: TestClient) -> None:
    body = client.get(
        "/api/v1/topology/examples", params={**ALL_TIME, "source": "frontend", "target": "cartservice", "limit": 3}
    ).json()
    assert len(body["traces"]) == 3
    assert all(t["failed"] for t in body["traces"])
    assert all(len(t["trace_id"]) == 32 and t["server_duration_ms"] is None for t in body["traces"])
    durations = [t["client_duration_ms"] for t in body["traces"]]
    assert durations == sorted(durations, reverse=True)
    missing = client.get("/api/v1/topology/examples", params={**ALL_TIME, "source": "nobody", "target": "frontend"})
    assert missing.json()["traces"] == []


@pytest.mark.both_layouts
def test_red_by_service_matches_the_stored_spans(client: TestClient, demo_store: ClickHouse) -> None:
    body = client.get("/api/v1/red", params={**ALL_TIME, "group_by": "service", "step_s": MONTH_S}).json()
    stored = demo_store.query_rows(
        "SELECT ServiceName, count(), countIf(StatusCode = 'Error') FROM otel_traces GROUP BY ServiceName"
    )
    assert {g["service"]: (g["calls"], g["errors"]) for g in body["groups"]} == {s: (c, e) for s, c, e in stored}
    frontend = next(g for g in body["groups"] if g["service"] == "frontend")
    assert sum(point["calls"] for point in frontend["series"]) == frontend["calls"]
    assert frontend["p50_ms"] <= frontend["p95_ms"] <= frontend["p99_ms"] <= frontend["max_ms"]
    assert frontend["operation"] is None


def test_red_by_operation_of_one_kind(client: TestClient, demo_store: ClickHouse) -> None:
    params = {**ALL_TIME, "group_by": "operation", "span_kind": "Server", "service": "frontend", "step_s": MONTH_S}
    body = client.get("/api/v1/red", params=params).json()
    stored = demo_store.query_rows(
        "SELECT SpanName, count() FROM otel_traces WHERE ServiceName = 'frontend' AND SpanKind = 'Server' GROUP BY 1"
    )
    assert {g["operation"]: g["calls"] for g in body["groups"]} == dict(stored)
    assert {g["span_kind"] for g in body["groups"]} == {"Server"}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"step_s": 90}, "step_s"),
        ({"step_s": 60}, "step_s"),  # all time in minutes: too many steps
        ({"group_by": "tenant"}, "group_by"),
        ({"span_kind": "server"}, "span_kind"),
    ],
)
def test_red_rejects_bad_parameters(client: TestClient, params: dict, field: str) -> None:
    response = client.get("/api/v1/red", params={**ALL_TIME, "step_s": MONTH_S, **params})
    assert response.status_code == 400
    assert field in response.json()["error"]["message"]


def test_rollups_keep_tenants_apart(store: ClickHouse) -> None:
    storage = storage_of(store)
    storage.writer.write(demo_batch(DEMO))
    batch = store.query_arrow("SELECT * EXCEPT (Tenant, Version) FROM otel_traces WHERE ServiceName = 'flagd'")
    store.insert_arrow("otel_traces", with_tenant(batch.cast(SPAN_SCHEMA), "acme"))
    run_pipeline(storage)
    query = RedQuery("service", ALL_TIME["start_ns"], ALL_TIME["end_ns"], MONTH_S)
    acme = storage.reader.red(query, tenant="acme").totals
    assert acme["service"].to_list() == ["flagd"] and acme["calls"].to_list() == [25]
    default = storage.reader.red(query, tenant="default").totals
    assert dict(zip(default["service"], default["calls"], strict=True))["flagd"] == 25
    assert storage.reader.service_graph(0, ALL_TIME["end_ns"], tenant="acme")["client"].to_list() == ["user"]
    assert storage.reader.red(query, tenant=None).totals.filter(service="flagd")["calls"].item() == 50


@pytest.mark.both_layouts
def test_red_backfill_runs_once(store: ClickHouse) -> None:
    """Migration 0023 fills the RED rollup from spans stored before its view existed, and only while it is
    empty, so a repeat (a crash between apply and record) adds nothing."""
    storage_of(store).writer.write(demo_batch(DEMO))
    backfill = next(sql for version, _name, sql in migration_files() if version == 23)
    store.command(f"TRUNCATE TABLE {store.layout.table('hotspan_red_minutes')}")
    store.command(render(backfill, 0))
    store.command(render(backfill, 0))
    assert store.query_rows("SELECT sum(Calls) FROM hotspan_red_minutes")[0][0] == 547
