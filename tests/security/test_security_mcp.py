"""The MCP server at ``/mcp`` behind the REST API's auth and tenancy: no token is refused before any tool runs, a
token without the query role too, and every tool reads the caller's tenant only, whatever the arguments name.

The data (``security_support``): acme, beta and default tenants, one trace ID shared by acme and beta (beta's span
there names acme's span as its parent), beta's spans claiming ``tenant=acme`` in their attributes. The client is the
official SDK's (``mcp_kit``).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from mcp_kit import call_tool, list_tools, text
from security_support import (
    ACME_INGEST,
    ACME_QUERY,
    ACME_TRACE,
    BETA_QUERY,
    BETA_TRACE,
    SHARED_TRACE,
    foreign_markers,
)

from hotspan.server import RunningServer

TOKENS = {"acme": ACME_QUERY, "beta": BETA_QUERY}
OWN = {"acme": ACME_TRACE, "beta": BETA_TRACE}
WIDE = {"lookback_minutes": 24 * 60}
"""A window holding the seeded data (an hour old)."""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}},
}


def _post(server: RunningServer, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/mcp",
        json=INITIALIZE,
        headers={"accept": "application/json, text/event-stream", **headers},
        timeout=30,
    )


def test_no_token_is_refused(secured_server: RunningServer) -> None:
    answer = _post(secured_server, {})
    assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Bearer realm=")
    assert _post(secured_server, {"authorization": "Bearer hsp_not-a-token"}).status_code == 401


def test_a_token_without_the_query_role_is_forbidden(secured_server: RunningServer) -> None:
    assert _post(secured_server, ACME_INGEST.header).status_code == 403
    assert _post(secured_server, ACME_QUERY.header).status_code == 200


@pytest.mark.parametrize("tenant", list(TOKENS))
def test_a_tenant_reads_its_own_trace_and_never_anothers(secured_server: RunningServer, tenant: str) -> None:
    token = TOKENS[tenant].secret
    other = next(trace for owner, trace in OWN.items() if owner != tenant)
    own = call_tool(secured_server.base_url, "get_trace", {"trace_id": OWN[tenant]}, token)
    assert not own.is_error and f"{tenant}-gateway: POST /chat" in text(own)
    for tool in ("get_trace", "explain_trace"):
        result = call_tool(secured_server.base_url, tool, {"trace_id": other}, token)
        assert result.is_error and text(result).endswith(f"not_found: trace {other} not found"), text(result)
    pair = call_tool(secured_server.base_url, "compare_traces", {"trace_id_a": OWN[tenant], "trace_id_b": other}, token)
    assert pair.is_error and "not_found" in text(pair)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("get_trace", {"trace_id": SHARED_TRACE}),
        ("explain_trace", {"trace_id": SHARED_TRACE}),
        ("search_traces", WIDE),
        ("diagnose", WIDE),
        ("top_hotspots", WIDE),
        ("service_map", WIDE),
        ("compare_window", WIDE),
    ],
)
@pytest.mark.parametrize("tenant", list(TOKENS))
def test_no_tool_answer_holds_another_tenants_data(
    secured_server: RunningServer, tenant: str, tool: str, arguments: dict[str, Any]
) -> None:
    result = call_tool(secured_server.base_url, tool, arguments, TOKENS[tenant].secret)
    assert not result.is_error, text(result)
    leaked = [marker for marker in foreign_markers(tenant) if marker in text(result)]
    assert not leaked, f"{tool} leaked {leaked} to {tenant}"


def test_the_tools_are_listed_to_a_query_token(secured_server: RunningServer) -> None:
    assert "explain_trace" in {tool.name for tool in list_tools(secured_server.base_url, ACME_QUERY.secret)}
