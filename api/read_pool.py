"""Reads off the event loop that answers OTLP and ``/healthz``, a few at a time, within budgets.

A trace search over a large store returns hundreds of thousands of spans: the store's part takes seconds, turning
them into Jaeger's model and JSON tens of seconds of Python (issue 28 measured a 9 s stall of every OTLP export and
``/healthz`` per search, 37 s for four at once); a window's analysis, diagnosis or trace view is seconds of Python
too. Run on the event loop, that work stops every other request; run on Starlette's shared thread pool (40 threads),
twenty reads take the GIL from the loop twenty to one. So every read route of the REST API (``/api/v1``: traces,
trace views, analysis, RED, topology, diagnosis, incidents, capacity, throughput-latency), of the Jaeger and Tempo
APIs and every tool of the MCP server (``api.mcp_server``) uses one :class:`ReadPool` (``hotspan.app``), a route
body whole through :meth:`ReadPool.endpoint` or its reads through :meth:`ReadPool.run` and :meth:`ReadPool.json`
(the UI's callbacks and page loads are admitted by the same settings, on a count of their own:
``dashboards.request_guard``):

- every read, its conversion and its JSON run on :class:`ReadPool`'s own threads (``HOTSPAN_READ_WORKERS``), never on
  the loop; the loop only awaits them;
- at most ``workers + queue`` reads are admitted (``HOTSPAN_READ_QUEUE`` of them waiting); one more is refused at once
  with 503 and ``Retry-After`` rather than queued behind minutes of work;
- each statement runs within the store's budgets (:class:`storage.clickhouse.ReadBudget`, ``max_result_rows`` for a
  search's spans), and one over a budget is answered, not failed (:func:`limit_error`).

Statuses, each with the JSON error envelope of the API (``{"error": {...}}``, Jaeger's own on the Jaeger routes):
400 ``query_too_large`` (more SQL than the store parses), 413 ``read_too_large`` (more spans than a search may return,
or more memory than a read may use), 503 ``read_timeout`` and ``reads_busy`` (with ``Retry-After``).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import math
import threading
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from fastapi import Response
from pydantic import BaseModel

from api.errors import ApiError, limit_error
from api.models import ErrorResponse
from query.store import ReadLimitError

T = TypeVar("T")
P = ParamSpec("P")

DEFAULT_READ_WORKERS = 2
"""Default of ``HOTSPAN_READ_WORKERS``: reads that run at once. Each holds the GIL while it converts rows, so
every one more takes a share of the event loop's time; two keep an export answered in well under a second."""
DEFAULT_READ_QUEUE = 16
"""Default of ``HOTSPAN_READ_QUEUE``: reads that may wait for a worker before more are refused (503)."""
READ_ERRORS: dict[int | str, dict[str, Any]] = {
    413: {
        "model": ErrorResponse,
        "description": "`read_too_large`: the read would use more memory than one read may "
        "(HOTSPAN_READ_MAX_MEMORY_BYTES); narrow it.",
    },
    503: {
        "model": ErrorResponse,
        "description": "`reads_busy`: too many reads at once (HOTSPAN_READ_WORKERS + HOTSPAN_READ_QUEUE); or "
        "`read_timeout`: the read ran past HOTSPAN_READ_TIMEOUT_S. Retry after `Retry-After`.",
        "headers": {"Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}},
    },
}
"""The answers of a REST route whose reads run on a :class:`ReadPool`, for its router's ``responses`` (OpenAPI)."""


def spliced(envelope: BaseModel, key: str, items: Iterable[bytes]) -> bytes:
    """``envelope`` as JSON with its (first) empty list named ``key`` replaced by ``items`` (each one JSON value).

    A model of a large answer serializes in one call that holds the GIL throughout (a second for 100 MB), and its
    objects all alive at once make the garbage collector's full passes as long; serialized item by item as each is
    built, neither stops the event loop for more than an item's time.

    Raises:
        ValueError: ``envelope`` has no empty list named ``key``.
    """
    text = envelope.model_dump_json().encode()
    empty = b'"' + key.encode() + b'":[]'
    if empty not in text:
        raise ValueError(f"{key!r} is not an empty list in {type(envelope).__name__}")
    head, tail = text.split(empty, 1)
    return head + empty[:-1] + b",".join(items) + b"]" + tail


class ReadPool:
    """Runs blocking reads on ``workers`` threads of its own, admitting at most ``workers + queue`` at a time.

    Thread-safe; :meth:`run` and :meth:`json` are awaited on any event loop.

    Args:
        workers: reads that run at once (threads).
        queue: admitted reads that may wait for a thread; beyond, :meth:`run` raises 503 ``reads_busy`` at once.
        retry_after_s: the ``Retry-After`` of a 503, seconds (rounded up to whole seconds, at least 1).
    """

    def __init__(
        self, workers: int = DEFAULT_READ_WORKERS, queue: int = DEFAULT_READ_QUEUE, retry_after_s: float = 1.0
    ) -> None:
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="hotspan-read")
        self._room = threading.BoundedSemaphore(workers + queue)
        self.retry_after_s = retry_after_s

    async def run(self, read: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``read(*args, **kwargs)`` on a read thread; its result, or what it raised.

        Raises:
            api.errors.ApiError: 503 ``reads_busy`` (with ``Retry-After``) when ``workers + queue`` reads are
                admitted already; a budget's 400/413/503 when the store stopped the read (:func:`limit_error`).
        """
        if not self._room.acquire(blocking=False):
            raise ApiError(
                503,
                "reads_busy",
                "too many reads at once (HOTSPAN_READ_WORKERS + HOTSPAN_READ_QUEUE); retry later",
                {"Retry-After": str(max(1, math.ceil(self.retry_after_s)))},
            )
        try:
            call = functools.partial(contextvars.copy_context().run, read, *args, **kwargs)
            future = self._executor.submit(call)
        except BaseException:
            self._room.release()
            raise
        # Released when the read ends, not when its client leaves: a read still running holds its room.
        future.add_done_callback(lambda _: self._room.release())
        try:
            return await asyncio.wrap_future(future)
        except ReadLimitError as exc:
            raise limit_error(exc, self.retry_after_s) from exc

    async def json(self, build: Callable[[], BaseModel | bytes], headers: dict[str, str] | None = None) -> Response:
        """The JSON answer of ``build()`` (a model, or JSON already serialized: :func:`spliced`), built and serialized
        on a read thread (as :meth:`run`)."""

        def body() -> bytes | str:
            answer = build()
            return answer if isinstance(answer, bytes) else answer.model_dump_json()

        return Response(await self.run(body), media_type="application/json", headers=headers)

    def endpoint(self, handler: Callable[P, BaseModel]) -> Callable[P, Coroutine[Any, Any, Response]]:
        """The FastAPI endpoint of ``handler``, a blocking route body that reads and returns its response model: the
        endpoint runs it whole (parameter checks, reads, shaping the answer, JSON) on a read thread, as :meth:`json`.
        Goes under the route's decorator::

            @router.get("/red", operation_id="get_red", response_model=RedResponse)
            @reads.endpoint
            def red(tenant: Tenant, step_s: int = 60) -> RedResponse: ...

        FastAPI reads the parameters, name and docstring through the endpoint from ``handler``
        (``functools.wraps``), so the OpenAPI document is the one ``handler`` alone would give. The endpoint answers
        a :class:`Response` of the JSON, which FastAPI passes on unchecked: name the model in ``response_model``.

        Raises:
            api.errors.ApiError: as :meth:`run` (503 ``reads_busy``, a budget's 400/413/503), or what ``handler``
                raised.
        """

        @functools.wraps(handler)
        async def answer(*args: P.args, **kwargs: P.kwargs) -> Response:
            return await self.json(functools.partial(handler, *args, **kwargs))

        return answer

    def close(self) -> None:
        """Stop the threads once the reads running end; reads still waiting are cancelled."""
        self._executor.shutdown(wait=False, cancel_futures=True)
