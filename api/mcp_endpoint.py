"""``/mcp``: the MCP server (:mod:`api.mcp_server`) on the Streamable HTTP transport of the official SDK, in
Hotspan's HTTP app, behind the same auth and tenancy as the REST API (``hotspan.auth.policy`` gives it the ``query``
role; the tools read the tenant the middleware put in the request's scope).

- **Stateless, JSON answers.** Each POST is one exchange on a transport of its own: no session is kept between
  requests, so any query process behind a load balancer can answer, and nothing of one caller's outlives its
  request. Hotspan's tools never call back into the client, so they need no session and no event stream.
- **Built on the first request.** Importing the SDK costs the process about 24 MiB and a second or two; a server
  nobody asks pays neither (as SciPy is imported on first use, ``diagnosis.evidence``). The build runs on a worker
  thread, so the event loop keeps answering OTLP meanwhile.
- **Its task group started by the endpoint.** The SDK's session manager runs its exchanges in a task group that a
  Starlette app enters in its lifespan; Hotspan's uvicorn runs with lifespan off (``hotspan.server``), so the
  endpoint enters it on the first request, on the loop serving the app, and holds it for that loop's life.
- **DNS rebinding.** On a loopback bind the SDK checks ``Host`` and ``Origin`` (a web page must not reach a
  token-less loopback server through a rebound name); elsewhere tokens are required anyway (``hotspan.auth.binding``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from starlette.routing import Route

from api.read_pool import ReadPool
from query.service import QueryService

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
"""Where the MCP server answers (Streamable HTTP: ``POST``; ``GET`` and ``DELETE`` are refused, being stateless)."""

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Handler = Callable[[Scope, Receive, Send], Awaitable[None]]


class McpEndpoint:
    """The ASGI app at :data:`MCP_PATH` (module docstring). Serves on one event loop: the first request's.

    Args:
        query: the query room the tools read through.
        reads: the app's read pool (:mod:`api.read_pool`) the tools read on.
        host: the address the app is bound to (``HOTSPAN_HOST``): loopback turns the SDK's DNS-rebinding checks on.
    """

    def __init__(self, query: QueryService, reads: ReadPool, host: str) -> None:
        self._query = query
        self._reads = reads
        self._host = host
        self._ready: asyncio.Event | None = None
        # Held: the loop keeps only a weak reference to a task.
        self._task: asyncio.Task[None] | None = None
        self._handle: Handler | None = None
        self._failure: BaseException | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._ready is None:
            # No await between the test and the set: the first request alone starts the server.
            self._ready = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._serve(self._ready))
        await self._ready.wait()
        if self._handle is None:
            raise RuntimeError("the MCP server did not start") from self._failure
        await self._handle(scope, receive, send)

    def _build(self) -> StreamableHTTPSessionManager:
        """The SDK's session manager over Hotspan's tools (blocking: the SDK's import)."""
        # Imported here, not at the top: the SDK is loaded on the first /mcp request only (module docstring).
        from api.mcp_server import build_mcp_server

        server = build_mcp_server(self._query, self._reads)
        server.streamable_http_app(stateless_http=True, json_response=True, host=self._host)
        # The SDK logs every stateless exchange at INFO ("Terminating session: None"); warnings and errors stay.
        logging.getLogger("mcp").setLevel(logging.WARNING)
        return server.session_manager

    async def _serve(self, ready: asyncio.Event) -> None:
        """Build the server, enter its session manager's task group and hold it until the loop ends."""
        try:
            manager = await asyncio.to_thread(self._build)
            async with manager.run():
                self._handle = manager.handle_request
                ready.set()
                await asyncio.Event().wait()
        except Exception as exc:
            log.exception("the MCP server failed")
            self._failure = exc
        finally:
            self._handle = None
            ready.set()


def mount_mcp(app: FastAPI, query: QueryService, reads: ReadPool, host: str) -> None:
    """Serve :class:`McpEndpoint` at :data:`MCP_PATH` on ``app`` (left out of its OpenAPI description: the MCP
    server describes its tools itself)."""
    app.router.routes.append(
        Route(MCP_PATH, McpEndpoint(query, reads, host), methods=["GET", "POST", "DELETE"], include_in_schema=False)
    )
