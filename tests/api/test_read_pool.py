"""Every read route goes through the read pool (``api.read_pool``): its body runs on a read thread, over a budget it
answers 503 or 413, and with the pool full every ``/api`` and ``/tempo`` GET route that reads answers 503
``reads_busy`` with ``Retry-After`` at once (routes added later are covered without a change: they are read from the
OpenAPI document)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Annotated

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Query
from fastapi.testclient import TestClient
from pydantic import BaseModel

from api.errors import ApiError, install_error_handlers
from api.read_pool import ReadPool
from hotspan.server import RunningServer
from storage.clickhouse import ReadLimitError
from testkit import serve_in_process

PATH_VALUES = {
    "service": "svc",
    "trace_id": "1" * 32,
    "incident_id": "0" * 32,
    "tag": "service.name",
    "conversation_id": "c-1",
}
"""Values for the path parameters of the read routes."""
QUERIES = {
    "/api/operations": {"service": "svc"},
    "/api/traces": {"service": "svc"},
    "/api/v3/traces": {
        "query.serviceName": "svc",
        "query.startTimeMin": "2000-01-01T00:00:00Z",
        "query.startTimeMax": "2100-01-01T00:00:00Z",
    },
    "/api/v1/topology/examples": {"source": "a", "target": "b"},
}
"""Query parameters the routes that need some are given, so that they reach their read."""
READS_NOTHING = ("/tempo/api/echo", "/tempo/api/status/buildinfo")
"""Routes that read nothing (answered from constants), so are not admitted as reads."""


class Where(BaseModel):
    thread: str
    value: int


@pytest.fixture
def client() -> Iterator[TestClient]:
    """An app with one route through :meth:`ReadPool.endpoint`: ``/where?value=`` answers the thread its body ran on;
    ``value`` 400 raises an ApiError, 503 and 413 a store budget's error."""
    app, reads = FastAPI(), ReadPool(workers=1, queue=0)
    install_error_handlers(app)
    router = APIRouter()

    @router.get("/where", operation_id="where", response_model=Where)
    @reads.endpoint
    def where(value: Annotated[int, Query(ge=0, description="What to answer.")] = 7) -> Where:
        """Where the body ran."""
        if value == 400:
            raise ApiError(400, "invalid_parameter", "value: 400")
        if value in (503, 413):
            raise ReadLimitError("time" if value == 503 else "memory", "over budget")
        return Where(thread=threading.current_thread().name, value=value)

    app.include_router(router)
    with TestClient(app) as test_client:
        yield test_client
    reads.close()


def test_an_endpoint_runs_its_body_on_a_read_thread(client: TestClient) -> None:
    answer = client.get("/where", params={"value": 3})
    assert answer.status_code == 200
    assert answer.json()["value"] == 3
    assert answer.json()["thread"].startswith("hotspan-read")


def test_an_endpoint_keeps_its_body_s_parameters_and_docs(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/where"]["get"]
    assert operation["operationId"] == "where"
    assert operation["description"] == "Where the body ran."
    assert [(p["name"], p["description"]) for p in operation["parameters"]] == [("value", "What to answer.")]
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Where"
    }
    assert client.get("/where", params={"value": -1}).json()["error"]["code"] == "invalid_parameter"


def test_an_endpoint_answers_its_body_s_errors_and_the_store_s_budgets(client: TestClient) -> None:
    assert client.get("/where", params={"value": 400}).json()["error"]["code"] == "invalid_parameter"
    timeout = client.get("/where", params={"value": 503})
    assert (timeout.status_code, timeout.json()["error"]["code"]) == (503, "read_timeout")
    assert timeout.headers["retry-after"] == "1"
    memory = client.get("/where", params={"value": 413})
    assert (memory.status_code, memory.json()["error"]["code"]) == (413, "read_too_large")


@pytest.fixture(scope="module")
def served(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """An in-process Hotspan whose read pool runs one read and lets none wait."""
    server = serve_in_process(
        chdb_dsn, tmp_path_factory.mktemp("read_pool"), "readpool", read_workers=1, read_queue=0, grpc_port=-1
    )
    yield server
    server.stop()


def _read_routes(server: RunningServer) -> list[str]:
    """Every ``/api`` and ``/tempo`` GET route of ``server``'s OpenAPI document that reads, path parameters filled
    in."""
    spec = httpx.get(f"{server.base_url}/openapi.json", timeout=30).json()
    paths = []
    for path, operations in spec["paths"].items():
        if path.startswith(("/api", "/tempo")) and "get" in operations and path not in READS_NOTHING:
            for name, value in PATH_VALUES.items():
                path = path.replace(f"{{{name}}}", value)
            assert "{" not in path, f"no value for a path parameter of {path}: add it to PATH_VALUES"
            paths.append(path)
    return paths


def test_with_the_pool_full_every_read_route_answers_503_at_once(served: RunningServer) -> None:
    reads: ReadPool = served.http.server.config.app.state.reads
    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(60)

    holder = threading.Thread(target=asyncio.run, args=(reads.run(hold),))
    holder.start()
    routes = _read_routes(served)
    try:
        assert started.wait(30), "the holding read never started"
        with httpx.Client(base_url=served.base_url, timeout=30) as client:
            busy = {path: client.get(path, params=QUERIES.get(path)) for path in routes}
            # A malformed ID is the caller's mistake whatever the load: 400 before the route waits for a thread.
            own = f"/api/v1/traces/{PATH_VALUES['trace_id']}"
            malformed = [path.replace(PATH_VALUES["trace_id"], "bad-id") for path in routes if path.startswith(own)]
            refused = {path: client.get(path).status_code for path in malformed}
    finally:
        release.set()
        holder.join(30)
    assert len(routes) > 25, routes
    not_refused = {path: answer.status_code for path, answer in busy.items() if answer.status_code != 503}
    assert not not_refused, f"answered while every read thread was taken: {not_refused}"
    assert {answer.headers.get("retry-after") for answer in busy.values()} == {"1"}
    assert len(malformed) >= 6 and set(refused.values()) == {400}, refused
    with httpx.Client(base_url=served.base_url, timeout=60) as client:
        after = {path: client.get(path, params=QUERIES.get(path)).status_code for path in routes}
    assert 503 not in after.values() and 500 not in after.values(), after
