"""Ground truth of a driver run, measured without spans: the driver's own clocks and the bytes on the wire.

Per user request (one trace): the wall-clock end-to-end time (monotonic clock around the work), every HTTP
attempt to the LLM endpoint (start, first body byte, end, status, and the token counts the server returned,
parsed from the response body), and every tool's work interval. ``llm_in_flight_ns`` is the union of the
attempts' intervals, so concurrent or retried calls are not double counted; retry back-off sleeps between
attempts are not in it.

All times are **nanoseconds**: ``start_unix_ns`` anchors the request on the wall clock; every other time is
an offset from the request's start on the monotonic clock. The JSON written by :meth:`TruthRecorder.to_json`
is the ``*.truth.json`` beside each capture.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(slots=True)
class LlmAttempt:
    """One HTTP request to the LLM endpoint. Times: **ns** from the request start; ``None`` when not reached.

    ``first_byte_ns``: the first response body bytes (for a streamed answer, the first chunk, which the
    emulator sends at the first token). Token counts come from the response's ``usage`` (``None`` when it
    has none, e.g. a throttled attempt or a stream without ``include_usage``).
    """

    url: str
    start_ns: int
    end_ns: int | None = None
    headers_ns: int | None = None
    first_byte_ns: int | None = None
    status: int | None = None
    streamed: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None


@dataclass(slots=True)
class ToolRun:
    """One tool's work: ``name`` and its interval in **ns** from the request start."""

    name: str
    start_ns: int
    end_ns: int


@dataclass(slots=True)
class RequestTruth:
    """One user request (one trace, ``trace_id`` lowercase hex) and what was measured around it."""

    trace_id: str
    start_unix_ns: int
    e2e_ns: int = 0
    llm_attempts: list[LlmAttempt] = field(default_factory=list)
    tools: list[ToolRun] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RequestTruth:
        """A request measured by another process (the Node drivers), from its JSON: the fields of this class,
        ``llm_attempts`` and ``tools`` as lists of :class:`LlmAttempt` / :class:`ToolRun` fields (derived totals,
        if present, are ignored and recomputed by :meth:`summary`)."""
        return cls(
            trace_id=data["trace_id"],
            start_unix_ns=data["start_unix_ns"],
            e2e_ns=data["e2e_ns"],
            llm_attempts=[LlmAttempt(**attempt) for attempt in data["llm_attempts"]],
            tools=[ToolRun(**tool) for tool in data["tools"]],
        )

    def summary(self) -> dict[str, Any]:
        """The request as JSON-ready data, with the derived totals ``llm_in_flight_ns``, ``llm_share`` (in
        flight / e2e), ``tool_ns`` (union of tool intervals) and ``llm_calls`` (attempts answered 200)."""
        in_flight = union_ns([(a.start_ns, a.end_ns) for a in self.llm_attempts if a.end_ns is not None])
        return {
            **asdict(self),
            "llm_in_flight_ns": in_flight,
            "llm_share": in_flight / self.e2e_ns if self.e2e_ns else 0.0,
            "tool_ns": union_ns([(t.start_ns, t.end_ns) for t in self.tools]),
            "llm_calls": sum(1 for a in self.llm_attempts if a.status == 200),
        }


def union_ns(intervals: list[tuple[int, int]]) -> int:
    """Total length of the union of ``[start, end)`` intervals (same unit in and out)."""
    total = 0
    reach: int | None = None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


class TruthRecorder:
    """Collects :class:`RequestTruth` for requests run one after another (thread-safe for recording).

    HTTP attempts and tool runs recorded while no request is open are dropped (there are none in a driver).
    """

    def __init__(self) -> None:
        self.requests: list[RequestTruth] = []
        self._current: RequestTruth | None = None
        self._start_mono_ns = 0
        self._lock = threading.Lock()

    def now_ns(self) -> int:
        """Monotonic **ns** since the open request started (0 when none is open)."""
        return time.monotonic_ns() - self._start_mono_ns if self._current is not None else 0

    @contextmanager
    def request(self, trace_id: str) -> Iterator[RequestTruth]:
        """Measure one request around the ``with`` body; its e2e is the body's monotonic duration."""
        truth = RequestTruth(trace_id=trace_id, start_unix_ns=time.time_ns())
        with self._lock:
            self._current = truth
            self._start_mono_ns = time.monotonic_ns()
        try:
            yield truth
        finally:
            with self._lock:
                truth.e2e_ns = time.monotonic_ns() - self._start_mono_ns
                self._current = None
            self.requests.append(truth)

    def begin_attempt(self, url: str) -> LlmAttempt | None:
        """A new HTTP attempt of the open request (``None`` when no request is open)."""
        with self._lock:
            if self._current is None:
                return None
            attempt = LlmAttempt(url=url, start_ns=self.now_ns())
            self._current.llm_attempts.append(attempt)
            return attempt

    @contextmanager
    def tool(self, name: str) -> Iterator[None]:
        """Record the ``with`` body as a run of tool ``name``."""
        start = self.now_ns()
        try:
            yield
        finally:
            with self._lock:
                if self._current is not None:
                    self._current.tools.append(ToolRun(name, start, self.now_ns()))

    def to_json(self, meta: dict[str, Any]) -> str:
        """The truth file: ``meta`` (driver, libraries, settings) and ``requests`` (:meth:`RequestTruth.summary`)."""
        return json.dumps({**meta, "requests": [r.summary() for r in self.requests]}, indent=2)


def record_usage(attempt: LlmAttempt, body: bytes) -> None:
    """Fill ``attempt``'s token counts and finish reason from its response body: an OpenAI chat/completions body
    (JSON, or SSE ``data:`` chunks; ``usage.prompt_tokens``, ``prompt_tokens_details.cached_tokens``, the last
    ``finish_reason``) or an Anthropic Messages body (JSON, or the stream's ``message_start`` / ``message_delta``
    usage, the later counts winning; prompt tokens = ``input_tokens + cache_read_input_tokens +
    cache_creation_input_tokens``, cached = ``cache_read_input_tokens``, finish reason = ``stop_reason``) or an
    OpenAI Responses body (JSON, or the stream's last ``response.*`` event carrying the response: ``usage.
    input_tokens``, ``input_tokens_details.cached_tokens``, ``output_tokens``, finish reason = ``status``).
    Leaves them ``None`` for a body that is none of these (an error page)."""
    try:
        if attempt.streamed:
            lines = (line[6:] for line in body.splitlines() if line.startswith(b"data: "))
            payloads = [json.loads(line) for line in lines if line.strip() != b"[DONE]"]
        else:
            payloads = [json.loads(body)]
    except ValueError:
        return
    if any(payload.get("type") in ("message", "message_start") for payload in payloads):
        _record_messages_usage(attempt, payloads)
        return
    responses = [p.get("response", p) for p in payloads if p.get("object") == "response" or "response" in p]
    if responses:
        _record_responses_usage(attempt, responses[-1])
        return
    usage = next((p["usage"] for p in reversed(payloads) if p.get("usage")), None)
    reasons = [c["finish_reason"] for p in payloads for c in p.get("choices") or () if c.get("finish_reason")]
    attempt.finish_reason = reasons[-1] if reasons else None
    if usage is not None:
        attempt.prompt_tokens = usage.get("prompt_tokens")
        attempt.completion_tokens = usage.get("completion_tokens")
        attempt.cached_tokens = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")


def _record_messages_usage(attempt: LlmAttempt, payloads: list[dict[str, Any]]) -> None:
    usage: dict[str, int] = {}
    for payload in payloads:
        found = payload.get("usage") or (payload.get("message") or {}).get("usage") or {}
        usage |= {key: value for key, value in found.items() if isinstance(value, int)}
        reason = payload.get("stop_reason") or (payload.get("delta") or {}).get("stop_reason")
        attempt.finish_reason = reason or attempt.finish_reason
    if "input_tokens" in usage:
        cached = usage.get("cache_read_input_tokens", 0)
        attempt.prompt_tokens = usage["input_tokens"] + cached + usage.get("cache_creation_input_tokens", 0)
        attempt.completion_tokens = usage.get("output_tokens")
        attempt.cached_tokens = cached


def _record_responses_usage(attempt: LlmAttempt, response: dict[str, Any]) -> None:
    usage = response.get("usage") or {}
    attempt.finish_reason = response.get("status")
    if "input_tokens" in usage:
        attempt.prompt_tokens = usage["input_tokens"]
        attempt.completion_tokens = usage.get("output_tokens")
        attempt.cached_tokens = (usage.get("input_tokens_details") or {}).get("cached_tokens")
