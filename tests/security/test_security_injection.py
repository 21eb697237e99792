"""The SQL-injection corpus (``injection_corpus``, 331 payloads) through every filter parameter of the REST
API (``/api/v1``) and the Jaeger APIs (``/api``, ``/api/v3``), as tenant ``acme``.

Every answer must be a 200, 307, 400 or 404 (never a 500), carry none of the other tenants' markers, and find
nothing (no payload names anything acme owns). Parameters that reach SQL share one request per endpoint (all
set to the payload at once: each is still bound on its own); parameters parsed before any SQL (times,
durations, limits, IDs) get one request each, so a payload failing in one cannot hide another. Each payload goes
through a quarter of the probes by default, all with ``HOTSPAN_SECURITY_CORPUS=all`` (:func:`injection_corpus.spread`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from injection_corpus import CORPUS, spread
from security_support import ACME_QUERY, foreign_markers

from hotspan.server import RunningServer

ALLOWED = {200, 307, 400, 404}
"""Answers a payload may get: found nothing, bad parameter, unknown path, or Starlette's redirect of a path that a
decoded ``%2F`` left ending in ``/``."""
WINDOW_US = {"start": "0", "end": str(time.time_ns() // 1000 + 86_400_000_000)}
V3_WINDOW = {"query.startTimeMin": "2000-01-01T00:00:00Z", "query.startTimeMax": "2100-01-01T00:00:00Z"}


@dataclass(frozen=True)
class Probe:
    """One request shape: ``build(payload)`` → ``(path, query params)``; ``empty(body)`` says the answer found
    nothing (for 200s)."""

    name: str
    build: Callable[[str], tuple[str, list[tuple[str, str]]]]
    empty: Callable[[Any], bool]


def _segment(payload: str) -> str:
    return quote(payload, safe="")


def _nothing(_: Any) -> bool:
    return True


SQL_PROBES = (
    Probe(
        "v1 operations path",
        lambda p: (f"/api/v1/services/{_segment(p)}/operations", []),
        lambda b: b["operations"] == [],
    ),
    Probe(
        "v1 search: service, operation, attr key and value",
        lambda p: ("/api/v1/traces", [("service", p), ("operation", p), ("attr", f"{p}:{p}"), ("attr", f"k:{p}")]),
        lambda b: b["traces"] == [],
    ),
    Probe("jaeger services/{service}/operations", lambda p: (f"/api/services/{_segment(p)}/operations", []), _nothing),
    Probe(
        "jaeger operations: service, spanKind",
        lambda p: ("/api/operations", [("service", p), ("spanKind", p)]),
        lambda b: b["data"] == [],
    ),
    Probe(
        "jaeger search: service, operation, tag, tags",
        lambda p: (
            "/api/traces",
            [("service", p), ("operation", p), ("tag", f"{p}:{p}"), ("tags", json.dumps({p: p})), *WINDOW_US.items()],
        ),
        lambda b: b["data"] == [],
    ),
    Probe(
        "jaeger dependencies: service",
        lambda p: ("/api/dependencies", [("service", p)]),
        lambda b: b["data"] == [],
    ),
    Probe(
        "v3 operations: service, spanKind",
        lambda p: ("/api/v3/operations", [("service", p), ("spanKind", p)]),
        lambda b: b["operations"] == [],
    ),
    Probe(
        "v3 search: serviceName, operationName, attributes",
        lambda p: (
            "/api/v3/traces",
            [
                ("query.serviceName", p),
                ("query.operationName", p),
                ("query.attributes", json.dumps({p: p})),
                *V3_WINDOW.items(),
            ],
        ),
        _nothing,
    ),
)
"""Endpoints whose parameters reach SQL as bound values."""

_V1_SEARCH = [("service", "acme-gateway")]
_J_SEARCH = [("service", "acme-gateway"), *WINDOW_US.items()]
_V3_SEARCH = [("query.serviceName", "acme-gateway"), *V3_WINDOW.items()]


def _one(path: str, fixed: list[tuple[str, str]], name: str) -> Callable[[str], tuple[str, list[tuple[str, str]]]]:
    return lambda p: (path, [*[(k, v) for k, v in fixed if k != name], (name, p)])


_PARAMETER_PROBES = tuple(
    Probe(f"{path} {name}", _one(path, fixed, name), _nothing)
    for path, fixed, names in (
        (
            "/api/v1/traces",
            _V1_SEARCH,
            ("start_ns", "end_ns", "min_duration_ms", "max_duration_ms", "hotspot", "limit"),
        ),
        ("/api/traces", _J_SEARCH, ("start", "end", "lookback", "minDuration", "maxDuration", "limit", "traceID")),
        ("/api/dependencies", [], ("endTs", "lookback")),
        (
            "/api/v3/traces",
            _V3_SEARCH,
            (
                "query.startTimeMin",
                "query.startTimeMax",
                "query.durationMin",
                "query.durationMax",
                "query.searchDepth",
                "query.rawTraces",
                "query.filter",
            ),
        ),
    )
    for name in names
)
PARSED_PROBES = (
    *_PARAMETER_PROBES,
    Probe("v1 trace path", lambda p: (f"/api/v1/traces/{_segment(p)}", []), _nothing),
    Probe("jaeger trace path", lambda p: (f"/api/traces/{_segment(p)}", [("raw", p)]), _nothing),
    Probe("v3 trace path", lambda p: (f"/api/v3/traces/{_segment(p)}", [("startTime", p)]), _nothing),
)
"""Parameters parsed (times, durations, limits, IDs, flags) before any SQL runs, one at a time."""


@pytest.fixture(scope="module")
def acme(secured_server: RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=secured_server.base_url, headers=ACME_QUERY.header, timeout=30) as client:
        yield client


def _check(client: httpx.Client, probe: Probe, payload: str, expect_empty: bool) -> str | None:
    """The problem with ``probe``'s answer to ``payload``, if any."""
    path, params = probe.build(payload)
    answer = client.get(path, params=params)
    label = f"{probe.name} with {payload[:60]!r}"
    if answer.status_code not in ALLOWED:
        return f"{label}: HTTP {answer.status_code} {answer.text[:200]}"
    # A 400 may quote the payload back; only markers the payload does not itself hold count as leaks.
    leaked = [m for m in foreign_markers("acme") if m in answer.text and m not in payload]
    if leaked:
        return f"{label}: leaked {leaked}"
    if expect_empty and answer.status_code == 200 and not probe.empty(answer.json()):
        return f"{label}: matched something: {answer.text[:200]}"
    return None


def _run(client: httpx.Client, probes: tuple[Probe, ...], expect_empty: bool) -> list[str]:
    """The corpus through the probes (:func:`injection_corpus.spread`), four requests in flight (the server's
    threads overlap their SQL); one line per problem."""
    with ThreadPoolExecutor(4) as pool:
        found = pool.map(lambda pair: _check(client, pair[0], pair[1], expect_empty), spread(probes))
        return [problem for problem in found if problem is not None]


def test_corpus_size_and_spread() -> None:
    assert len(CORPUS) >= 300
    assert any("\x00" in p for p in CORPUS) and any("{tenant:String}" in p for p in CORPUS)
    for probes in (SQL_PROBES, PARSED_PROBES):
        pairs = spread(probes)
        assert {payload for _, payload in pairs} == set(CORPUS)
        assert {probe.name for probe, _ in pairs} == {probe.name for probe in probes}


@pytest.fixture(scope="module")
def before(secured_server: RunningServer, acme: httpx.Client) -> tuple[set[str], list[str]]:
    """The store as the corpus finds it: its tables and acme's services (the package's server is shared, and
    other modules may have stored spans of their own first)."""
    tables = {row[0] for row in secured_server.storage.clickhouse.query_rows("SHOW TABLES")}
    return tables, acme.get("/api/v1/services").json()["services"]


def test_parameters_reaching_sql(acme: httpx.Client, before: tuple[set[str], list[str]]) -> None:
    problems = _run(acme, SQL_PROBES, expect_empty=True)
    assert not problems, "\n".join(problems[:40])


def test_parameters_parsed_before_sql(acme: httpx.Client, before: tuple[set[str], list[str]]) -> None:
    problems = _run(acme, PARSED_PROBES, expect_empty=False)
    assert not problems, "\n".join(problems[:40])


def test_the_corpus_did_not_change_the_store(
    secured_server: RunningServer, acme: httpx.Client, before: tuple[set[str], list[str]]
) -> None:
    """Still exactly the tables and acme's answer the corpus found (runs after the corpus in file order)."""
    tables = {row[0] for row in secured_server.storage.clickhouse.query_rows("SHOW TABLES")}
    assert "pwned" not in tables and "otel_traces" in tables and tables == before[0]
    services = acme.get("/api/v1/services").json()["services"]
    assert services == before[1] and {"acme-gateway", "acme-llm"} <= set(services)
