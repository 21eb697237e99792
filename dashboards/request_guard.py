"""An ASGI guard in front of the Dash app's WSGI bridge: a body limit for every request under ``/ui``, a schema
check of callback bodies (``POST /_dash-update-component``), and an admission limit on the requests that run page code.

The bridge (``a2wsgi``) hands Flask the whole body, and Dash answers a callback body it cannot read with a 500
(a ``KeyError`` for an unknown output, a ``TypeError`` for inputs that are not a list). The guard answers instead:

- 413 when ``Content-Length`` is over the limit, before one byte of the body is read, or as soon as a body without
  a length (chunked) passes the limit; at most ``max_body_bytes`` are ever held;
- 400 for a callback body that is not UTF-8 JSON (nesting too deep included), not an object, or whose ``output`` is
  not a callback of the app, whose ``outputs`` is not an object or a list, or whose ``inputs``, ``state`` and
  ``changedPropIds`` are not lists of ``{"id", "property"}`` objects (ids strings or pattern objects) and strings.

Callbacks and layout requests (``GET /_dash-layout``, which builds the page being opened) read the store and build
figures in Python on the bridge's threads (ten), each holding the GIL while it works: a flood of them takes the GIL
from the event loop that answers OTLP and ``/healthz`` as a flood of API reads would. So they are admitted as the
API's reads are (``api.read_pool``, whose settings they share): at most ``workers`` run at once, ``queue`` more wait
on the event loop (holding no thread), and one more is answered at once with 503 ``reads_busy`` and ``Retry-After``,
which Dash shows as a failed callback. The count is the UI's own, apart from the API's: Dash runs on the bridge's
threads, not the read pool's, so a server busy with both runs up to twice ``workers`` reads. Assets and other requests
are not counted: they run no page code, and one page load fetches dozens at once.

Errors are JSON ``{"error": {"code", "message"}}``. A body that passes is replayed unchanged to the app.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Callable, Container
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dashboards.first_page import LAYOUT_ROUTE

CALLBACK_PATH = "/_dash-update-component"
"""Dash's callback route, under the app's prefix."""
PAGE_CODE_PATHS = (CALLBACK_PATH, "/" + LAYOUT_ROUTE)
"""Routes whose requests run page code (callbacks, page layouts): those admitted a few at a time."""


class BodyError(Exception):
    """A body the guard refuses: ``status`` 400 or 413, ``message`` naming what is wrong."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class UiRequestGuard:
    """The guard (module docstring) around ``app``, the ASGI face of the Dash server. Runs on one event loop (its
    counts are not locked).

    Args:
        app: what requests that pass go to.
        max_body_bytes: largest body of one request, bytes.
        callbacks: the app's callback outputs (``Dash.callback_map``, read at each request: pages register theirs
            at start).
        workers: requests running page code that run at once (``HOTSPAN_READ_WORKERS``).
        queue: more of them that may wait for one of those to end (``HOTSPAN_READ_QUEUE``); beyond, 503.
        retry_after_s: the ``Retry-After`` of a 503, seconds (rounded up to whole seconds, at least 1).
    """

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        callbacks: Callable[[], Container[str]],
        workers: int,
        queue: int,
        retry_after_s: float,
    ) -> None:
        self._app = app
        self._max = max_body_bytes
        self._callbacks = callbacks
        self._running = asyncio.Semaphore(workers)
        self._room = workers + queue
        self._admitted = 0
        self._retry_after = str(max(1, math.ceil(retry_after_s)))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if not scope["path"].endswith(PAGE_CODE_PATHS):
            await self._checked(scope, receive, send, contextlib.nullcontext())
            return
        if self._admitted >= self._room:
            message = (
                "too many UI callbacks and page loads at once (HOTSPAN_READ_WORKERS + HOTSPAN_READ_QUEUE); retry later"
            )
            busy = JSONResponse(
                {"error": {"code": "reads_busy", "message": message}},
                status_code=503,
                headers={"Retry-After": self._retry_after},
            )
            await busy(scope, receive, send)
            return
        self._admitted += 1
        try:
            await self._checked(scope, receive, send, self._running)
        finally:
            self._admitted -= 1

    async def _checked(
        self, scope: Scope, receive: Receive, send: Send, slot: contextlib.AbstractAsyncContextManager[Any]
    ) -> None:
        """``scope`` to the app within ``slot`` once its body (of a method that has one) passed the checks, else
        the 400 or 413 that says why."""
        if scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            try:
                body = await self._read(scope, receive)
                if scope["path"].endswith(CALLBACK_PATH):
                    check_callback(body, self._callbacks())
            except BodyError as exc:
                code = "body_too_large" if exc.status == 413 else "invalid_callback"
                response = JSONResponse({"error": {"code": code, "message": exc.message}}, status_code=exc.status)
                await response(scope, receive, send)
                return
            receive = _replay(body, receive)
        async with slot:
            await self._app(scope, receive, send)

    async def _read(self, scope: Scope, receive: Receive) -> bytes:
        """The whole body, at most ``max_body_bytes``. Raises BodyError 413 above it (before reading when the
        length is announced), 400 for a malformed ``Content-Length``."""
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None:
            if not length.isdigit():
                raise BodyError(400, "Content-Length is not a number")
            if int(length) > self._max:
                raise BodyError(413, f"body of {int(length)} bytes is over the limit of {self._max}")
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max:
                raise BodyError(413, f"body is over the limit of {self._max} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def check_callback(body: bytes, callbacks: Container[str]) -> None:
    """Raise BodyError 400 unless ``body`` is a Dash callback request for one of ``callbacks`` (module docstring)."""
    try:
        request = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BodyError(400, f"callback body is not JSON: {str(exc)[:100]}") from None
    if not isinstance(request, dict):
        raise BodyError(400, "callback body is not an object")
    output = request.get("output")
    if not isinstance(output, str) or output not in callbacks:
        raise BodyError(400, "output: not a callback of this app")
    if not isinstance(request.get("outputs"), dict | list):
        raise BodyError(400, "outputs: must be an object or a list")
    for name in ("inputs", "state"):
        items = request.get(name, [])
        if not isinstance(items, list) or not all(_is_property(item) for item in items):
            raise BodyError(400, f"{name}: must be a list of {{id, property}} objects")
    changed = request.get("changedPropIds", [])
    if not isinstance(changed, list) or not all(isinstance(item, str) for item in changed):
        raise BodyError(400, "changedPropIds: must be a list of strings")


def _is_property(item: Any) -> bool:
    """An input or state entry: ``{"id", "property"}`` (or a list of them, for a pattern-matching input)."""
    if isinstance(item, list):
        return all(_is_property(entry) for entry in item)
    return isinstance(item, dict) and isinstance(item.get("id"), str | dict) and isinstance(item.get("property"), str)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields ``body`` once, then whatever ``receive`` says (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed
