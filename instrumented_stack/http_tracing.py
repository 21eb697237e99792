"""Spans for connection set-up of an ``httpx`` call: ``connect`` (TCP) and ``tls_handshake``.

The OTel httpx instrumentation records one CLIENT span per request and nothing about the connection, so a
call that opened a new TCP connection and did a TLS handshake looks the same as one that reused a pooled
connection. ``httpcore`` reports both phases through the request's ``trace`` extension
(``connection.connect_tcp.started|complete|failed``, ``connection.start_tls.started|complete|failed``);
:func:`connection_trace` turns each phase into an INTERNAL span under the span current at the call, with
``network.peer.address``/``network.peer.port`` on ``connect``. A call over a pooled connection records no
such span.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

TraceCallback = Callable[[str, dict[str, Any]], Awaitable[None]]

CONNECT_SPAN = "connect"
TLS_SPAN = "tls_handshake"
_PHASES = {"connection.connect_tcp": CONNECT_SPAN, "connection.start_tls": TLS_SPAN}


def connection_trace(tracer: Tracer) -> TraceCallback:
    """An async ``trace`` extension callback for one request (pass as ``extensions={"trace": ...}``)."""
    open_spans: dict[str, Span] = {}

    async def on_event(event: str, info: dict[str, Any]) -> None:
        phase, _, stage = event.rpartition(".")
        name = _PHASES.get(phase)
        if name is None:
            return
        if stage == "started":
            attributes = {}
            if name == CONNECT_SPAN:
                attributes = {
                    "network.peer.address": str(info.get("host", "")),
                    "network.peer.port": int(info.get("port") or 0),
                }
            open_spans[name] = tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)
            return
        span = open_spans.pop(name, None)
        if span is None:
            return
        if stage == "failed":
            span.set_status(Status(StatusCode.ERROR, repr(info.get("exception"))))
        span.end()

    return on_event
