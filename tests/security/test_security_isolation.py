"""Tenant isolation on every read path: by trace ID, by search, by service and operation lists, by Jaeger
dependencies (topology), in the UI's callbacks and on every parameterless ``/api`` route; and the tenant a
span is stored under comes from the sender's token, never from the span.

The data (``security_support``): acme, beta and default tenants, one trace ID shared by acme and beta (beta's
span there names acme's span as its parent), beta's spans claiming ``tenant=acme`` in their attributes.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from security_support import (
    ACME_INGEST,
    ACME_QUERY,
    ACME_TRACE,
    ADMIN,
    BETA_INGEST,
    BETA_QUERY,
    BETA_TRACE,
    DEFAULT_QUERY,
    DEFAULT_TRACE,
    MARKERS,
    SHARED_TRACE,
    Token,
    export_body,
    foreign_markers,
    span,
)

from collector.otlp_json import request_from_json
from hotspan.server import RunningServer
from testkit import dash_update_body

TENANT_TOKENS = {"acme": ACME_QUERY, "beta": BETA_QUERY, "default": DEFAULT_QUERY}
OWN_TRACES = {"acme": ACME_TRACE, "beta": BETA_TRACE, "default": DEFAULT_TRACE}
SERVICES = {
    "acme": ["acme-gateway", "acme-llm"],
    "beta": ["beta-db", "beta-gateway", "beta-intruder"],
    "default": ["default-svc"],
}
WINDOW = {"start": "0", "end": str(2**62 // 1000)}
V3_WINDOW = {"query.startTimeMin": "2000-01-01T00:00:00Z", "query.startTimeMax": "2100-01-01T00:00:00Z"}


def _get(server: RunningServer, token: Token, path: str, **params: Any) -> httpx.Response:
    return httpx.get(f"{server.base_url}{path}", headers=token.header, params=params, timeout=30)


def _assert_clean(answer: httpx.Response, tenant: str) -> None:
    leaked = [m for m in foreign_markers(tenant) if m in answer.text]
    assert not leaked, f"{answer.request.url} leaked {leaked} to {tenant}"


@pytest.mark.parametrize("tenant", list(TENANT_TOKENS))
def test_services_and_operations_are_per_tenant(secured_server: RunningServer, tenant: str) -> None:
    token = TENANT_TOKENS[tenant]
    assert _get(secured_server, token, "/api/v1/services").json()["services"] == SERVICES[tenant]
    assert _get(secured_server, token, "/api/services").json()["data"] == SERVICES[tenant]
    assert _get(secured_server, token, "/api/v3/services").json()["services"] == SERVICES[tenant]
    for other, services in SERVICES.items():
        if other == tenant:
            continue
        for service in services:
            assert _get(secured_server, token, f"/api/v1/services/{service}/operations").json()["operations"] == []
            assert _get(secured_server, token, f"/api/services/{service}/operations").json()["data"] == []
            assert _get(secured_server, token, "/api/operations", service=service).json()["data"] == []
            assert _get(secured_server, token, "/api/v3/operations", service=service).json()["operations"] == []


@pytest.mark.parametrize("tenant", list(TENANT_TOKENS))
def test_another_tenants_trace_is_not_found_by_id(secured_server: RunningServer, tenant: str) -> None:
    token = TENANT_TOKENS[tenant]
    for other, trace_id in OWN_TRACES.items():
        if other == tenant:
            continue
        assert _get(secured_server, token, f"/api/v1/traces/{trace_id}").status_code == 404
        assert _get(secured_server, token, f"/api/traces/{trace_id}").status_code == 404
        assert _get(secured_server, token, f"/api/v3/traces/{trace_id}").status_code == 404
        by_ids = _get(secured_server, token, "/api/traces", traceID=trace_id)
        assert by_ids.json()["data"] == [] and by_ids.json()["errors"][0]["code"] == 404
    own = _get(secured_server, token, f"/api/v1/traces/{OWN_TRACES[tenant]}")
    assert own.status_code == 200
    _assert_clean(own, tenant)


def test_a_shared_trace_id_shows_each_tenant_its_own_spans(secured_server: RunningServer) -> None:
    acme = _get(secured_server, ACME_QUERY, f"/api/v1/traces/{SHARED_TRACE}").json()
    assert [(s["service_name"], s["span_id"]) for s in acme["spans"]] == [("acme-gateway", "aaaa0000000000ff")]
    beta = _get(secured_server, BETA_QUERY, f"/api/traces/{SHARED_TRACE}").json()["data"]
    assert [s["spanID"] for trace in beta for s in trace["spans"]] == ["bbbb0000000000ff"]
    v3 = _get(secured_server, ACME_QUERY, f"/api/v3/traces/{SHARED_TRACE}")
    _assert_clean(v3, "acme")
    admin = _get(secured_server, ADMIN, f"/api/v1/traces/{SHARED_TRACE}").json()
    assert sorted(s["span_id"] for s in admin["spans"]) == ["aaaa0000000000ff", "bbbb0000000000ff"]


@pytest.mark.parametrize("tenant", list(TENANT_TOKENS))
def test_searches_find_only_the_tenants_traces(secured_server: RunningServer, tenant: str) -> None:
    token = TENANT_TOKENS[tenant]
    expected = {OWN_TRACES[tenant]} | ({SHARED_TRACE} if tenant in ("acme", "beta") else set())
    everything = _get(secured_server, token, "/api/v1/traces", limit=100)
    assert {t["trace_id"] for t in everything.json()["traces"]} == expected
    for service in SERVICES[tenant]:
        jaeger = _get(secured_server, token, "/api/traces", service=service, **WINDOW)
        _assert_clean(jaeger, tenant)
        assert jaeger.json()["data"]
        v3 = _get(secured_server, token, "/api/v3/traces", **{"query.serviceName": service, **V3_WINDOW})
        _assert_clean(v3, tenant)
    for other, services in SERVICES.items():
        if other == tenant:
            continue
        for service in services:
            assert _get(secured_server, token, "/api/v1/traces", service=service).json()["traces"] == []
            assert _get(secured_server, token, "/api/traces", service=service, **WINDOW).json()["data"] == []
            v3 = _get(secured_server, token, "/api/v3/traces", **{"query.serviceName": service, **V3_WINDOW})
            assert v3.status_code == 404
        prompt = f"{other}-secret-prompt"
        assert _get(secured_server, token, "/api/v1/traces", attr=f"prompt:{prompt}").json()["traces"] == []
        tags = json.dumps({"prompt": prompt})
        assert _get(secured_server, token, "/api/traces", service="x", tags=tags, **WINDOW).json()["data"] == []


def test_span_content_cannot_claim_a_tenant(secured_server: RunningServer) -> None:
    """beta's spans say tenant=acme in span and resource attributes; acme still cannot find them."""
    for key in ("tenant", "hotspan.tenant"):
        answer = _get(secured_server, ACME_QUERY, "/api/v1/traces", attr=f"{key}:acme")
        assert answer.json()["traces"] == []
    assert _get(secured_server, BETA_QUERY, "/api/v1/traces", attr="tenant:acme").json()["traces"]


def test_dependencies_never_join_spans_across_tenants(secured_server: RunningServer) -> None:
    def edges(token: Token) -> set[tuple[str, str]]:
        week_ms = 7 * 86_400_000
        end_ms = time.time_ns() // 1_000_000 + 86_400_000
        data = _get(secured_server, token, "/api/dependencies", endTs=end_ms, lookback=week_ms).json()["data"]
        return {(d["parent"], d["child"]) for d in data}

    assert edges(ACME_QUERY) == {("acme-gateway", "acme-llm")}
    assert edges(BETA_QUERY) == {("beta-gateway", "beta-db")}
    assert edges(DEFAULT_QUERY) == set()
    assert {("acme-gateway", "acme-llm"), ("beta-gateway", "beta-db")} <= edges(ADMIN)


def test_an_admin_reads_every_tenant(secured_server: RunningServer) -> None:
    services = _get(secured_server, ADMIN, "/api/v1/services").json()["services"]
    assert set(services) >= {s for names in SERVICES.values() for s in names}
    found = {t["trace_id"] for t in _get(secured_server, ADMIN, "/api/v1/traces", limit=100).json()["traces"]}
    assert found >= {ACME_TRACE, BETA_TRACE, DEFAULT_TRACE, SHARED_TRACE}


def test_every_parameterless_api_route_stays_within_the_tenant(secured_server: RunningServer) -> None:
    """Every GET route under ``/api`` (and Tempo's ``/tempo``) the OpenAPI description lists without required
    parameters, including routes added after this test was written (rollups, topology, ...), answers acme without
    another tenant's data."""
    spec = httpx.get(f"{secured_server.base_url}/openapi.json", timeout=30).json()
    checked = []
    for path, operations in spec["paths"].items():
        get = operations.get("get")
        if not path.startswith(("/api", "/tempo")) or get is None or "{" in path:
            continue
        if any(p.get("required") for p in get.get("parameters", [])):
            continue
        answer = _get(secured_server, ACME_QUERY, path)
        assert answer.status_code < 500, f"{path}: {answer.status_code} {answer.text[:300]}"
        _assert_clean(answer, "acme")
        checked.append(path)
    assert {"/api/v1/services", "/api/services", "/api/v3/services", "/api/dependencies"} <= set(checked)
    assert {"/tempo/api/search", "/tempo/api/v2/search/tags"} <= set(checked)


def _dash_call(client: httpx.Client, output: str, values: dict[str, object]) -> dict[str, Any]:
    """Run the UI callback whose output names ``output`` (as the browser does); returns its ``response``."""
    dependencies = client.get("/ui/_dash-dependencies").json()
    (dependency,) = [d for d in dependencies if output in d["output"]]
    answer = client.post("/ui/_dash-update-component", json=dash_update_body(dependency, values))
    assert answer.status_code == 200, answer.text[:300]
    return answer.json()["response"]


def test_the_ui_shows_only_the_sessions_tenant(secured_server: RunningServer) -> None:
    with httpx.Client(base_url=secured_server.base_url, timeout=60) as client:
        assert client.get("/ui/", params={"token": ACME_QUERY.secret}).status_code == 303
        services = _dash_call(client, "search-service.options", {"search-init.data": True})
        assert services["search-service"]["options"] == SERVICES["acme"]
        operations = _dash_call(client, "search-operation.options", {"search-service.value": "beta-gateway"})
        assert operations["search-operation"]["options"] == []
        found = _dash_call(client, "search-results.rowData", {"search-lookback.value": "7d", "search-limit.value": 100})
        text = json.dumps(found)
        assert ACME_TRACE in text and not [m for m in foreign_markers("acme") if m in text]
        for trace_id in (BETA_TRACE, DEFAULT_TRACE):
            for page in (json.dumps(_trace_page(client, trace_id)), json.dumps(_trace_layout(client, trace_id))):
                # The page names the ID it was asked for; nothing else of the trace may show.
                assert "not found" in page and not [m for m in foreign_markers("acme") if m in page and m != trace_id]
        for shared in (json.dumps(_trace_page(client, SHARED_TRACE)), json.dumps(_trace_layout(client, SHARED_TRACE))):
            assert "acme-gateway" in shared and "beta-intruder" not in shared
        # Later requests of the page (rows, a span's detail) read the view kept for this session's tenant.
        rows = json.dumps(_dash_call(client, "trace-rows.data", {"trace-request.data": {"trace_id": SHARED_TRACE}}))
        assert "beta-intruder" not in rows


def _trace_page(client: httpx.Client, trace_id: str) -> dict[str, Any]:
    """The trace page as Dash's pages router renders it for this session (the layout reads the trace)."""
    return _dash_call(client, "_pages_content.children", {"_pages_location.pathname": f"/ui/trace/{trace_id}"})


def _trace_layout(client: httpx.Client, trace_id: str) -> dict[str, Any]:
    """The trace page as a page load of this session gets it: its HTML (which starts reading the trace ahead), then
    the layout, which holds the page its ``Referer`` names (``dashboards/first_page.py``)."""
    address = f"{str(client.base_url).rstrip('/')}/ui/trace/{trace_id}"
    assert client.get(address).status_code == 200
    answer = client.get("/ui/_dash-layout", headers={"Referer": address})
    assert answer.status_code == 200, answer.text[:300]
    return answer.json()


def _stored_tenants(server: RunningServer, service: str) -> list[str]:
    rows = server.storage.clickhouse.query_rows(
        "SELECT DISTINCT Tenant FROM otel_traces WHERE ServiceName = {s:String}", {"s": service}
    )
    return [row[0] for row in rows]


def test_ingest_stores_spans_under_the_tokens_tenant(secured_server: RunningServer) -> None:
    http_service, grpc_service = f"stamp-http-{uuid.uuid4().hex[:8]}", f"stamp-grpc-{uuid.uuid4().hex[:8]}"
    claims = {"tenant": "beta", "hotspan.tenant": "beta"}
    body = export_body(http_service, span(uuid.uuid4().hex, "3" * 16, "", "x", 0, **claims), **claims)
    answer = httpx.post(
        f"{secured_server.base_url}/v1/traces",
        content=json.dumps(body),
        headers={**ACME_INGEST.header, "content-type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    request, _ = request_from_json(export_body(grpc_service, span(uuid.uuid4().hex, "4" * 16, "", "x", 0)))
    with grpc.insecure_channel(f"127.0.0.1:{secured_server.grpc_port}") as channel:
        trace_service_pb2_grpc.TraceServiceStub(channel).Export(
            trace_service_pb2.ExportTraceServiceRequest.FromString(request.SerializeToString()),
            metadata=(("authorization", f"Bearer {BETA_INGEST.secret}"),),
            timeout=10,
        )
    assert _stored_tenants(secured_server, http_service) == ["acme"]
    assert _stored_tenants(secured_server, grpc_service) == ["beta"]
    assert _get(secured_server, ACME_QUERY, "/api/v1/services").json()["services"].count(http_service) == 1


def test_markers_are_distinct() -> None:
    """The leak checks rely on each marker belonging to one tenant only."""
    owners = [m for markers in MARKERS.values() for m in markers]
    assert len(owners) == len(set(owners))
