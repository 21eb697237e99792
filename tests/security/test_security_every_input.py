"""Every input, not a hand-picked list: every query parameter of every ``/api`` GET route the OpenAPI description
lists (path parameters set to acme's own values) takes injection payloads, every UI callback runs with another
tenant's identifiers in its inputs, and a span body re-sent by another tenant is that tenant's, not a repeat.

Complements ``test_security_injection.py`` (the whole corpus through the filter parameters known to reach SQL)
and ``test_security_isolation.py`` (the read paths, case by case): routes and callbacks added later are covered
here without a change.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from injection_corpus import CORPUS
from security_support import (
    ACME_INGEST,
    ACME_QUERY,
    ACME_TRACE,
    BETA_INGEST,
    BETA_QUERY,
    BETA_TRACE,
    DEFAULT_TRACE,
    SHARED_TRACE,
    export_body,
    foreign_markers,
    span,
    write_auth_file,
)

from hotspan.server import RunningServer
from testkit import dash_update_body, layout_ids, serve_in_process

PAYLOADS = CORPUS[:: max(1, len(CORPUS) // 8)]
"""A spread of the corpus (about 8 payloads) per parameter: every parameter, bounded time."""

PATH_VALUES = {
    "service": "acme-gateway",
    "trace_id": ACME_TRACE,
    "incident_id": "0" * 32,
    "conversation_id": "acme-conversation",
}
"""Values for path parameters: acme's own, so the route reaches its query."""


def _routes(server: RunningServer) -> list[tuple[str, list[str]]]:
    """``(path with acme's values filled in, query parameter names)`` of every ``/api`` GET route."""
    spec = httpx.get(f"{server.base_url}/openapi.json", timeout=30).json()
    routes = []
    for path, operations in spec["paths"].items():
        get = operations.get("get")
        if not path.startswith("/api") or get is None:
            continue
        filled = path
        for name, value in PATH_VALUES.items():
            filled = filled.replace(f"{{{name}}}", value)
        assert "{" not in filled, f"no value for a path parameter of {path}: add it to PATH_VALUES"
        routes.append((filled, [p["name"] for p in get.get("parameters", []) if p["in"] == "query"]))
    return routes


def parameters(server: RunningServer) -> list[tuple[str, str]]:
    """``(path, query parameter name)`` of every query parameter of every ``/api`` GET route (:func:`_routes`)."""
    return [(path, name) for path, names in _routes(server) for name in names]


def answers(server: RunningServer, values: Sequence[str]) -> Iterator[tuple[str, str, str, httpx.Response]]:
    """``(path, parameter, value, answer)`` of ``GET path?parameter=value`` as acme, for every parameter
    (:func:`parameters`) and each of ``values``."""
    with httpx.Client(base_url=server.base_url, headers=ACME_QUERY.header, timeout=60) as client:
        for path, name in parameters(server):
            for value in values:
                yield path, name, value, client.get(path, params={name: value})


def test_injection_payloads_through_every_query_parameter_of_every_route(secured_server: RunningServer) -> None:
    problems, checked = [], 0
    for path, name, payload, answer in answers(secured_server, PAYLOADS):
        checked += 1
        leaked = [m for m in foreign_markers("acme") if m in answer.text and m not in payload]
        if answer.status_code >= 500 or leaked:
            problems.append(f"{path}?{name}={payload[:40]!r}: {answer.status_code} {leaked}")
    assert checked > 500, f"only {checked} requests: the routes were not found"
    assert not problems, "\n".join(problems[:40])


def _callbacks(client: httpx.Client) -> list[dict[str, Any]]:
    return [d for d in client.get("/ui/_dash-dependencies").json() if d.get("clientside_function") is None]


FOREIGN_INPUTS: dict[str, object] = {
    "trace-id.data": BETA_TRACE,
    "search-service.value": "beta-gateway",
    "search-operation.value": "POST /chat",
    "search-lookback.value": "7d",
    "search-limit.value": 100,
    "nav-lookup.value": BETA_TRACE,
    "nav-lookup.n_submit": 1,
    "search-submit.n_clicks": 1,
    "search-init.data": True,
    "search-results.cellClicked": {"rowId": BETA_TRACE, "value": BETA_TRACE},
    "search-scatter.clickData": {"points": [{"customdata": [BETA_TRACE]}]},
    "trace-waterfall.clickData": {"points": [{"customdata": ["bbbb000000000001"]}]},
    "trace-flame.clickData": {"points": [{"customdata": ["bbbb000000000001"]}]},
    "topology-graph.tapEdgeData": {"source": "beta-gateway", "target": "beta-db"},
    "app-url.pathname": f"/ui/trace/{BETA_TRACE}",
    "_pages_location.pathname": f"/ui/trace/{BETA_TRACE}",
    "_pages_location.search": f"?trace_id={DEFAULT_TRACE}",
}
"""What a curious acme user might put into each UI input: beta's and default's trace IDs, services and spans."""


def test_every_ui_callback_with_another_tenants_identifiers_shows_nothing_of_them(
    secured_server: RunningServer,
) -> None:
    with httpx.Client(base_url=secured_server.base_url, timeout=60) as client:
        assert client.get("/ui/", params={"token": ACME_QUERY.secret}).status_code == 303
        callbacks = _callbacks(client)
        ids = list(layout_ids(client.get("/ui/_dash-layout").json()))
        problems, answered = [], 0
        for dependency in callbacks:
            body = dash_update_body(dependency, FOREIGN_INPUTS, ids)
            answer = client.post("/ui/_dash-update-component", json=body)
            answered += answer.status_code == 200
            text = answer.text
            # The page may name the ID it was asked for ("not found"); nothing else of another tenant may show.
            leaked = [m for m in foreign_markers("acme") if m in text and m not in json.dumps(body)]
            if answer.status_code >= 500 or leaked:
                problems.append(f"{dependency['output'][:60]}: {answer.status_code} {leaked} {text[:120]}")
    assert len(callbacks) >= 15 and answered >= 12, f"{answered} of {len(callbacks)} callbacks answered"
    assert not problems, "\n".join(problems)


@pytest.fixture
def writable_secured_server(chdb_dsn: str, tmp_path: Path) -> Iterator[RunningServer]:
    """A served Hotspan with the security tests' tokens and no data: the shared ``secured_server`` is read-only."""
    server = serve_in_process(chdb_dsn, tmp_path, "wsec", auth_file=write_auth_file(tmp_path), session_secret="s" * 40)
    yield server
    server.stop()


def test_a_body_another_tenant_sent_already_is_stored_for_this_one_too(writable_secured_server: RunningServer) -> None:
    """Deduplication of re-sent spans (storage.writer.OnceWriter) keys on the tenant: beta sending the very bytes
    acme sent stores beta's copy, and each tenant reads its own."""
    server = writable_secured_server
    body = json.dumps(export_body("twin-svc", span(SHARED_TRACE, "eeee000000000001", "", "twin", 7))).encode()
    for token in (ACME_INGEST, BETA_INGEST, ACME_INGEST):
        answer = httpx.post(
            f"{server.base_url}/v1/traces",
            content=body,
            headers={**token.header, "content-type": "application/json"},
            timeout=30,
        )
        assert answer.status_code == 200
    for token in (ACME_QUERY, BETA_QUERY):
        spans = httpx.get(f"{server.base_url}/api/v1/traces/{SHARED_TRACE}", headers=token.header, timeout=30).json()
        assert [s["span_id"] for s in spans["spans"]] == ["eeee000000000001"], token.tenant
