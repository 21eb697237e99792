"""HTTP transports that time every LLM request on the wire, for the ground truth (``truth``).

They wrap ``httpx2``'s transports (the OpenAI Python SDK >= 3 and the frameworks over it send through
``httpx2``): an attempt starts when the client hands the request to the transport and ends when the response
body is closed (for a stream, after the client read the last chunk); the first body bytes are timed, and the
body is kept to read the ``usage`` the server returned. No span is read or written here.

With ``inject_context`` the transport also injects the current W3C trace context (``traceparent``) into the
request, for runs without HTTP client spans (the httpx instrumentation injects it itself when on).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx2
from opentelemetry import propagate

from instrumented_stack.realclients.truth import LlmAttempt, TruthRecorder, record_usage


class _Timing:
    """What one attempt saw of its response body; ``finish`` closes the attempt once."""

    def __init__(self, recorder: TruthRecorder, attempt: LlmAttempt) -> None:
        self._recorder = recorder
        self._attempt = attempt
        self._body = bytearray()
        self._done = False

    def saw(self, chunk: bytes) -> None:
        if self._attempt.first_byte_ns is None and chunk:
            self._attempt.first_byte_ns = self._recorder.now_ns()
        self._body += chunk

    def finish(self) -> None:
        if self._done:
            return
        self._done = True
        attempt = self._attempt
        attempt.end_ns = self._recorder.now_ns()
        record_usage(attempt, bytes(self._body))


class _SyncBody(httpx2.SyncByteStream):
    def __init__(self, inner: httpx2.SyncByteStream, timing: _Timing) -> None:
        self._inner = inner
        self._timing = timing

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            self._timing.saw(chunk)
            yield chunk

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._timing.finish()


class _AsyncBody(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, timing: _Timing) -> None:
        self._inner = inner
        self._timing = timing

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._timing.saw(chunk)
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._timing.finish()


def _begin(recorder: TruthRecorder, request: httpx2.Request, inject_context: bool) -> LlmAttempt | None:
    if inject_context:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        request.headers.update(carrier)
    return recorder.begin_attempt(str(request.url))


def _recorded(
    recorder: TruthRecorder, attempt: LlmAttempt | None, response: httpx2.Response, *, asynchronous: bool
) -> httpx2.Response:
    """``response`` with its body read through a timing wrapper (unchanged when no attempt is recorded)."""
    if attempt is None:
        return response
    attempt.headers_ns = recorder.now_ns()
    attempt.status = response.status_code
    attempt.streamed = response.headers.get("content-type", "").startswith("text/event-stream")
    timing = _Timing(recorder, attempt)
    stream = response.stream
    body = _AsyncBody(stream, timing) if asynchronous else _SyncBody(stream, timing)  # type: ignore[arg-type]
    return httpx2.Response(response.status_code, headers=response.headers, stream=body, extensions=response.extensions)


class RecordingTransport(httpx2.BaseTransport):
    """A synchronous ``httpx2`` transport recording each attempt into ``recorder`` (see module docstring)."""

    def __init__(self, recorder: TruthRecorder, *, inject_context: bool = False) -> None:
        self._inner = httpx2.HTTPTransport()
        self._recorder = recorder
        self._inject = inject_context

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        attempt = _begin(self._recorder, request, self._inject)
        return _recorded(self._recorder, attempt, self._inner.handle_request(request), asynchronous=False)

    def close(self) -> None:
        self._inner.close()


class AsyncRecordingTransport(httpx2.AsyncBaseTransport):
    """The asynchronous twin of :class:`RecordingTransport`."""

    def __init__(self, recorder: TruthRecorder, *, inject_context: bool = False) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._recorder = recorder
        self._inject = inject_context

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        attempt = _begin(self._recorder, request, self._inject)
        response = await self._inner.handle_async_request(request)
        return _recorded(self._recorder, attempt, response, asynchronous=True)

    async def aclose(self) -> None:
        await self._inner.aclose()
