"""A real MCP client for the tests of Hotspan's MCP server (``api/mcp_server.py``): the official SDK's Streamable HTTP
client and ``ClientSession``, talking to a served Hotspan on loopback, one session per call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Tool

T = TypeVar("T")
TIMEOUT_S = 120.0
"""Longest a tool call may take (a window's diagnosis on a loaded host)."""


def in_session(base_url: str, use: Callable[[ClientSession], Awaitable[T]], token: str | None = None) -> T:
    """``use(session)`` on an initialized session with the server at ``base_url``'s ``/mcp``, sending ``token`` as a
    bearer token when given."""

    async def run() -> T:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_S) as http,
            streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write, *_),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await use(session)

    return asyncio.run(run())


def call_tool(base_url: str, name: str, arguments: dict[str, Any], token: str | None = None) -> CallToolResult:
    """The result of one call of tool ``name``."""
    return in_session(base_url, lambda session: session.call_tool(name, arguments), token)


def list_tools(base_url: str, token: str | None = None) -> list[Tool]:
    """The server's tools."""

    async def tools(session: ClientSession) -> list[Tool]:
        return (await session.list_tools()).tools

    return in_session(base_url, tools, token)


def text(result: CallToolResult) -> str:
    """The text of a result's content blocks, joined."""
    return "\n".join(block.text for block in result.content if block.type == "text")
