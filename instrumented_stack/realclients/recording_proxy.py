"""A reverse proxy that times every LLM request on the wire, for clients whose HTTP stack cannot be wrapped.

A program that is not Python or Node we can hook (the Claude Code CLI, a single native binary) is pointed at this
proxy instead of the emulator. Each request is forwarded with ``httpx`` and its response streamed back chunk by
chunk; the attempt (:class:`~instrumented_stack.realclients.truth.LlmAttempt`) starts when the request's headers
have arrived (its body, tens of kB for an agent's prompt, is still in flight), ``headers_ns`` when the emulator's
response headers do, ``first_byte_ns`` at the first body chunk and ``end_ns`` once the last chunk has been handed
back; token counts are read from the body (:func:`~instrumented_stack.realclients.truth.record_usage`). No span is
read or written here; whether the client sent a ``traceparent`` is recorded (:attr:`RecordingProxy.traceparents`).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from instrumented_stack.realclients.truth import TruthRecorder, record_usage

_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "host", "content-encoding"})


MESSAGES_PATHS = frozenset({"/v1/messages"})
"""The paths recorded by default: model calls (not ``count_tokens``, nor a client's reachability probe)."""


class RecordingProxy:
    """Forwards every request to ``upstream`` (a root URL) and records those to a ``recorded`` path in
    ``recorder``'s open request.

    Use :meth:`app` as an ASGI app (one event loop). ``traceparents`` counts the requests that carried one.
    """

    def __init__(self, upstream: str, recorder: TruthRecorder, recorded: frozenset[str] = MESSAGES_PATHS) -> None:
        self._upstream = upstream.rstrip("/")
        self._recorder = recorder
        self._recorded = recorded
        self._lock = threading.Lock()
        self.requests = 0
        self.traceparents = 0

    def app(self) -> Starlette:
        """The proxy as a Starlette app answering every path and method."""
        methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
        return Starlette(routes=[Route("/{path:path}", self._forward, methods=methods)])

    async def _forward(self, request: Request) -> StreamingResponse:
        path = request.url.path
        attempt = self._recorder.begin_attempt(path) if path in self._recorded else None
        body = await request.body()
        with self._lock:
            self.requests += 1
            self.traceparents += "traceparent" in request.headers
        headers = _end_to_end(request.headers.items())
        client = httpx.AsyncClient(timeout=None)
        url = self._upstream + path
        upstream = client.build_request(request.method, url, params=request.query_params, headers=headers, content=body)
        response = await client.send(upstream, stream=True)
        if attempt is not None:
            attempt.headers_ns = self._recorder.now_ns()
            attempt.status = response.status_code
            attempt.streamed = response.headers.get("content-type", "").startswith("text/event-stream")

        async def chunks() -> AsyncIterator[bytes]:
            received = bytearray()
            try:
                async for chunk in response.aiter_raw():
                    if attempt is not None and attempt.first_byte_ns is None and chunk:
                        attempt.first_byte_ns = self._recorder.now_ns()
                    received += chunk
                    yield chunk
            finally:
                await response.aclose()
                await client.aclose()
                if attempt is not None:
                    attempt.end_ns = self._recorder.now_ns()
                    record_usage(attempt, bytes(received))

        kept = _end_to_end(response.headers.items())
        return StreamingResponse(chunks(), status_code=response.status_code, headers=kept)


def _end_to_end(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``headers`` without the hop-by-hop ones (and those the forwarding client or server sets itself)."""
    return {key: value for key, value in headers if key.lower() not in _HOP_BY_HOP}
