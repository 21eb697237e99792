"""Many OTLP/HTTP senders against a served Hotspan, each answer's status, latency and ``Retry-After`` recorded.

A plain module (not ``conftest``) so the reliability tests import it by a name no other folder shares.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from reads import SpanSpec, request

EXPORTER_TIMEOUT_S = 10.0
"""The OTLP exporters' default export timeout (``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s): an answer later than this
is lost to the sender, which sends again."""


MARKER = b"\xab" * 16
"""The trace ID of :func:`batch`'s template, replaced in every request sent (:func:`with_trace`)."""


def with_trace(template: bytes, number: int) -> bytes:
    """``template`` (a :func:`batch` or :func:`json_batch`) with trace ID ``number`` instead of :data:`MARKER`: a
    new trace per request at the cost of one bytes replace."""
    trace_id = (number + 1).to_bytes(16, "big")
    if template.startswith(b"{"):
        return template.replace(MARKER.hex().encode(), trace_id.hex().encode())
    return template.replace(MARKER, trace_id)


def json_batch(spans: int = 512) -> bytes:
    """:func:`batch` as OTLP/JSON (hex IDs)."""
    document = json_format.MessageToDict(ExportTraceServiceRequest.FromString(batch(spans)))
    for resource_spans in document["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                span["traceId"] = MARKER.hex()
                span["spanId"] = base64.b64decode(span["spanId"]).hex()
    return json.dumps(document).encode()


def batch(spans: int = 512) -> bytes:
    """A request of ``spans`` spans of trace :data:`MARKER` (20 attributes each), as the SDK's batch processor sends
    them."""
    attributes = {f"attribute.{key}": "v" * 40 for key in range(20)}
    specs = [SpanSpec(index + 1, start_ns=index, duration_ns=10, attributes=attributes) for index in range(spans)]
    return request(int.from_bytes(MARKER, "big"), specs, "flood")


@dataclass
class Answers:
    """What the senders got: per answer its status (0: no answer), seconds, and Retry-After when given; the trace
    numbers of the requests answered 200."""

    statuses: Counter[int] = field(default_factory=Counter)
    acknowledged: set[int] = field(default_factory=set)
    latencies: list[float] = field(default_factory=list)
    throttled_without_hint: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, number: int, status: int, seconds: float, retry_after: str | None) -> None:
        with self.lock:
            self.statuses[status] += 1
            if status == 200:
                self.acknowledged.add(number)
            self.latencies.append(seconds)
            if status in (429, 503) and not (retry_after or "").isdigit():
                self.throttled_without_hint += 1

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of the answer latencies, seconds."""
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def flood(url: str, template: bytes, senders: int, seconds: float, backoff: bool = False) -> Answers:
    """``senders`` threads posting ``template`` for ``seconds``, each request a new trace (:func:`with_trace`); with
    ``backoff`` a throttled sender waits the ``Retry-After`` it was given before its next request, as OTLP exporters
    do."""
    answers = Answers()
    stop = threading.Event()
    media = "application/json" if template.startswith(b"{") else "application/x-protobuf"

    def send(offset: int) -> None:
        with httpx.Client(timeout=60) as client:
            number = offset * 1_000_000
            while not stop.is_set():
                started = time.monotonic()
                try:
                    answer = client.post(url, content=with_trace(template, number), headers={"content-type": media})
                    status, hint = answer.status_code, answer.headers.get("retry-after")
                except httpx.HTTPError:
                    status, hint = 0, None
                answers.add(number, status, time.monotonic() - started, hint)
                number += 1
                if backoff and status in (429, 503):
                    stop.wait(float(hint or 1))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(senders)]
    for thread in threads:
        thread.start()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return answers
