"""The Tempo API (``/tempo/api/...``) keeps tenants apart and survives hostile input: a tenant finds none of another's
traces by search (TraceQL, tags, a ``>>`` walk through another tenant's parent span), by ID, by tag names or tag
values; the injection corpus (``injection_corpus``, each payload through a quarter of the inputs unless
``HOTSPAN_SECURITY_CORPUS=all``) inside TraceQL strings, attribute names, logfmt tags and tag paths answers 200 or
400, never 500, and leaks nothing. Data: ``security_support``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from injection_corpus import spread
from security_support import (
    ACME_QUERY,
    ACME_TRACE,
    BETA_QUERY,
    BETA_TRACE,
    DEFAULT_QUERY,
    DEFAULT_TRACE,
    SHARED_TRACE,
    Token,
    foreign_markers,
)

from hotspan.server import RunningServer

TENANT_TOKENS = {"acme": ACME_QUERY, "beta": BETA_QUERY, "default": DEFAULT_QUERY}
OWN_TRACES = {"acme": {ACME_TRACE, SHARED_TRACE}, "beta": {BETA_TRACE, SHARED_TRACE}, "default": {DEFAULT_TRACE}}
WINDOW = {"start": "0", "end": "4102444800"}


def _foreign(tenant: str) -> set[str]:
    """The seeded traces ``tenant`` must never find. (Other modules sharing the server may store more traces of
    ``tenant``'s own: a search may find those.)"""
    return set().union(*OWN_TRACES.values()) - OWN_TRACES[tenant]


def _get(server: RunningServer, token: Token | None, path: str, **params: Any) -> httpx.Response:
    headers = token.header if token else {}
    return httpx.get(f"{server.base_url}/tempo{path}", headers=headers, params=params, timeout=30)


def _assert_clean(answer: httpx.Response, tenant: str) -> None:
    assert answer.status_code in (200, 400, 404), (answer.request.url, answer.status_code, answer.text[:200])
    if answer.status_code == 400:
        return  # refused before any read: its text may quote the caller's own input, which holds the markers
    leaked = [m for m in foreign_markers(tenant) if m in answer.text]
    assert not leaked, f"{answer.request.url} leaked {leaked} to {tenant}"


def test_the_api_needs_a_query_token(secured_server: RunningServer) -> None:
    refused = _get(secured_server, None, "/api/search")
    assert refused.status_code == 401 and refused.headers["content-type"].startswith("text/plain")
    assert _get(secured_server, ACME_QUERY, "/api/echo").text == "echo"


@pytest.mark.parametrize("tenant", list(TENANT_TOKENS))
def test_search_and_lookup_see_the_own_tenant_only(secured_server: RunningServer, tenant: str) -> None:
    token = TENANT_TOKENS[tenant]
    for q in ("{ }", '{ .prompt != "x" }', "{ duration >= 0ns }", "{ } && { }", "{ } >> { }", "{ } || { }"):
        answer = _get(secured_server, token, "/api/search", q=q, limit="1000", spss="100", **WINDOW)
        _assert_clean(answer, tenant)
        found = {trace["traceID"] for trace in answer.json()["traces"]}
        assert not found & _foreign(tenant), q
    for other, traces in OWN_TRACES.items():
        for trace_id in traces - OWN_TRACES[tenant]:
            for path in (f"/api/traces/{trace_id}", f"/api/v2/traces/{trace_id}"):
                assert _get(secured_server, token, path).status_code == 404, (tenant, other, path)
    for tag in ("resource.service.name", "span.prompt", "name", "span.tenant"):
        _assert_clean(_get(secured_server, token, f"/api/v2/search/tag/{tag}/values", **WINDOW), tenant)
    _assert_clean(_get(secured_server, token, "/api/v2/search/tags", **WINDOW), tenant)


def test_a_descendant_walk_never_crosses_into_another_tenants_spans(secured_server: RunningServer) -> None:
    # beta-intruder's span in the shared trace names acme's span as its parent: for beta the parent is not there
    q = '{ } >> { resource.service.name = "beta-intruder" }'
    assert _get(secured_server, BETA_QUERY, "/api/search", q=q, **WINDOW).json()["traces"] == []
    q = '{ resource.service.name = "acme-gateway" } >> { }'
    found = {
        trace["traceID"]: trace
        for trace in _get(secured_server, ACME_QUERY, "/api/search", q=q, **WINDOW).json()["traces"]
    }
    assert SHARED_TRACE not in found  # the shared trace's child is beta's
    assert [span["spanID"] for span in found[ACME_TRACE]["spanSet"]["spans"]] == ["aaaa000000000002"]


def _quoted(payload: str) -> str:
    """``payload`` inside a TraceQL or logfmt double-quoted string."""
    return payload.replace("\\", "\\\\").replace('"', '\\"')


TEMPO_INPUTS: tuple[Callable[[str], tuple[str, dict[str, str]]], ...] = (
    lambda p: ("/api/search", {"q": f'{{ span.prompt = "{_quoted(p)}" }}'}),
    lambda p: ("/api/search", {"q": f'{{ resource."{_quoted(p)}" != "x" }}'}),
    lambda p: ("/api/search", {"q": p}),
    lambda p: ("/api/search", {"tags": f'prompt="{_quoted(p)}"'}),
    lambda p: ("/api/search", {"tags": p}),
    lambda p: ("/api/search", {"minDuration": p}),
    lambda p: ("/api/search", {"start": p}),
    lambda p: ("/api/search", {"limit": p}),
    lambda p: (f"/api/v2/search/tag/span.{quote(p, safe='')}/values", {}),
    lambda p: (f"/api/traces/{quote(p, safe='')}", {}),
)
"""Each Tempo input a payload can reach: ``payload → (path, query parameters)``."""


def test_injection_corpus_in_every_tempo_input(secured_server: RunningServer) -> None:
    with httpx.Client(base_url=f"{secured_server.base_url}/tempo", headers=ACME_QUERY.header, timeout=30) as acme:
        for build, payload in spread(TEMPO_INPUTS):
            path, params = build(payload)
            answer = acme.get(path, params=params)
            _assert_clean(answer, "acme")
            if answer.status_code == 200 and path == "/api/search":
                assert not {t["traceID"] for t in answer.json()["traces"]} & _foreign("acme")
