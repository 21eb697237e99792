"""A bounded set of decoders for the OTLP/HTTP receiver: overload answered with 429 in time, not with a late 200.

Decoding a body (inflate, protobuf check or JSON conversion) is CPU-bound and mostly holds the GIL: running more
at once only makes every answer later. Under 80 senders of JSON bodies, Hotspan without a bound answered after
5-10 s (issue 17 measured 10.6 s), past the OTLP exporters' 10 s default timeout, so each late answer became a
failed export sent again. :class:`DecoderPool` runs at most ``decoders`` decodes at once and bounds the wait for
one: a request whose estimated wait passes ``wait_s`` is refused before its body is read (cheap), and one that
still waits that long is refused after it, both with :class:`collector.ingest_pipeline.QueueFullError` (429 with
``Retry-After``). Event-loop only: every method must be called from the loop that serves the requests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

from starlette.concurrency import run_in_threadpool

from collector.ingest_pipeline import QueueFullError

T = TypeVar("T")

_SMOOTHING = 0.2
"""Weight of the newest decode time in the running mean."""


class DecoderPool:
    """Decodes on worker threads, ``decoders`` at a time, with bounded waits (see the module docstring).

    Args:
        decoders: decodes run at once.
        wait_s: longest wait for a decoder before the request is refused, seconds.
        retry_after_s: the retry hint of a refusal, seconds.
    """

    def __init__(self, decoders: int, wait_s: float, retry_after_s: float) -> None:
        self._decoders = decoders
        self._wait_s = wait_s
        self._retry_after_s = retry_after_s
        self._free = asyncio.Semaphore(decoders)
        self._ahead = 0
        self._mean_s = 0.0

    def enter(self) -> None:
        """Count a new request in, before its body is read; pair with :meth:`leave`.

        Raises:
            QueueFullError: the requests already in would keep this one waiting longer than ``wait_s``.
        """
        queued = self._ahead - self._decoders + 1
        estimate = max(0, queued) / self._decoders * self._mean_s
        if estimate > self._wait_s:
            raise QueueFullError(
                f"{self._ahead} requests wait for {self._decoders} decoders (about {estimate:.1f} s); retry later",
                self._retry_after_s,
            )
        self._ahead += 1

    def leave(self) -> None:
        """Count a request out (decoded, refused or failed)."""
        self._ahead -= 1

    async def run(self, decode: Callable[[bytes], T], body: bytes) -> T:
        """``decode(body)`` on a worker thread once a decoder is free.

        Raises:
            QueueFullError: no decoder became free within ``wait_s``.
        """
        try:
            async with asyncio.timeout(self._wait_s):
                await self._free.acquire()
        except TimeoutError:
            raise QueueFullError(
                f"all {self._decoders} decoders busy for {self._wait_s:g} s; retry later", self._retry_after_s
            ) from None
        started = time.monotonic()
        try:
            return await run_in_threadpool(decode, body)
        finally:
            self._mean_s += _SMOOTHING * (time.monotonic() - started - self._mean_s)
            self._free.release()
