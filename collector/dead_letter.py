"""Spans the store refuses although the receiver accepted them: found by bisection, set aside, never silently lost.

The receiver checks every span against the rules the store relies on (:func:`collector.batch.check_span`,
:mod:`collector.otlp_json`) before it answers 200, so a refused insert should mean an unavailable store. Should a
span pass the checks and still fail its insert every time (a store-side limit nobody knew of), it would block its
whole insert group and everything grouped with it, retried forever. The ingest pipeline therefore answers an insert
that the store refuses (the server answered with an error, as opposed to not answering) by :func:`isolate`: it
stores the group's halves, and the halves of what fails, down to single spans. What still fails once the store has
shown it takes other inserts is *poisoned*: written to the dead-letter directory as an OTLP protobuf file per span
(``hotspan import`` reads them back once the cause is fixed), with its reason beside it, counted and logged.

This is the Collector's and Kafka Connect's dead-letter-queue idea applied to a write-ahead spool: the rest of the
group is stored, and nothing acknowledged is dropped without a file and a log line.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from clickhouse_connect.driver.exceptions import ClickHouseError, OperationalError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.native_writer import native_shape
from collector.spool import fsync_directory

log = logging.getLogger(__name__)

Request = tuple[bytes, str]
"""One spooled request: its serialized ``ExportTraceServiceRequest`` and its tenant."""

FAILURES_BEFORE_PROOF = 2
"""Refused parts :func:`isolate` tries before any part is stored, without other proof that the store takes inserts:
the group's two halves. When both are refused the refusal is taken for a failing store (the group is retried later
with back-off, as in an outage: each attempt then costs the whole and two halves, not a bisection down to spans);
once another insert has succeeded since, the next attempt isolates without this bound."""


@dataclass(frozen=True)
class Poisoned:
    """A request part the store refused: ``body`` (one span, or a request the protobuf runtime cannot read) for
    ``tenant``, and the store's ``reason``."""

    body: bytes
    tenant: str
    reason: str


class UnprovenRefusal(RuntimeError):
    """Every part tried was refused and the store has not shown since that it takes other inserts: a failing store,
    not poisoned data. Nothing was stored."""


def spans_in(body: bytes) -> int:
    """Spans in a serialized ``ExportTraceServiceRequest`` (0 for unreadable bytes), counted without decoding."""
    shape = native_shape(body)
    return shape[2] if shape is not None else 0


def split_request(body: bytes) -> tuple[bytes, bytes] | None:
    """A request of two or more spans cut into two requests of half its spans each, every span keeping its resource
    and scope; None for one span or fewer, or bytes the protobuf runtime cannot read."""
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except Exception:
        return None
    places = [
        (r, s, p)
        for r, resource in enumerate(request.resource_spans)
        for s, scope in enumerate(resource.scope_spans)
        for p in range(len(scope.spans))
    ]
    if len(places) < 2:
        return None
    half = len(places) // 2
    return _subset(request, places[:half]), _subset(request, places[half:])


def _subset(request: ExportTraceServiceRequest, places: Sequence[tuple[int, int, int]]) -> bytes:
    """The request holding only the spans at ``places`` (in order), under copies of their resources and scopes."""
    part = ExportTraceServiceRequest()
    targets: dict[tuple[int, int], object] = {}
    resources: dict[int, object] = {}
    for r, s, p in places:
        source_resource = request.resource_spans[r]
        if r not in resources:
            resource = part.resource_spans.add()
            resource.resource.CopyFrom(source_resource.resource)
            resource.schema_url = source_resource.schema_url
            resources[r] = resource
        if (r, s) not in targets:
            source_scope = source_resource.scope_spans[s]
            scope = resources[r].scope_spans.add()  # type: ignore[attr-defined]
            scope.scope.CopyFrom(source_scope.scope)
            scope.schema_url = source_scope.schema_url
            targets[(r, s)] = scope
        targets[(r, s)].spans.add().CopyFrom(request.resource_spans[r].scope_spans[s].spans[p])  # type: ignore[attr-defined]
    return part.SerializeToString()


def isolate(
    requests: Sequence[Request], store: Callable[[Sequence[Request]], None], proven: bool, reason: str
) -> list[Poisoned]:
    """Store ``requests`` (whose insert as a whole the store refused) in ever smaller parts, breadth first: halves
    of the request list, then of a request's spans, down to one span.

    Args:
        store: stores one part, each span once (storing a part again stores nothing new); raises
            ``ClickHouseError`` when the store refuses it.
        proven: the store has taken another insert since this group was first refused, so a part refused now is
            refused for what it holds (a store that starts failing during the isolation is then taken for refusing
            every part: the parts are set aside in files, not lost).
        reason: the store's answer to ``requests`` as a whole (the reason of a single span that cannot be split).

    Returns:
        The parts still refused (single spans, or requests that cannot be split), every other part stored.

    Raises:
        clickhouse_connect.driver.exceptions.OperationalError: the store stopped answering (an outage).
        UnprovenRefusal: :data:`FAILURES_BEFORE_PROOF` parts were refused before any was stored, or none was stored
            at all, and ``proven`` is false.
    """
    pending: deque[list[Request]] = deque(_halves(list(requests)))
    refused: list[tuple[Request, str]] = [] if pending else [(requests[0], reason)]
    failures = 0
    while pending:
        part = pending.popleft()
        try:
            store(part)
            proven = True
            continue
        except OperationalError:
            raise
        except ClickHouseError as exc:
            failures += 1
            if not proven and failures >= FAILURES_BEFORE_PROOF:
                raise UnprovenRefusal(f"{failures} parts refused, none stored: {exc}") from exc
            halves = _halves(part)
            if halves:
                pending.extend(halves)
            else:
                refused.append((part[0], str(exc)))
    if not proven:
        raise UnprovenRefusal(f"every part of {len(requests)} requests refused, none stored")
    return [Poisoned(body, tenant, reason) for (body, tenant), reason in refused]


def _halves(part: list[Request]) -> list[list[Request]]:
    """Two halves of a part: of its requests, or of its one request's spans; empty for a single span."""
    if len(part) > 1:
        return [part[: len(part) // 2], part[len(part) // 2 :]]
    (body, tenant) = part[0]
    split = split_request(body)
    return [[(split[0], tenant)], [(split[1], tenant)]] if split is not None else []


class DeadLetters:
    """The dead-letter directory: one ``<time>-<n>.otlp.pb`` (an ``ExportTraceServiceRequest``, importable with
    ``hotspan import --tenant``) and one ``.reason.txt`` (tenant and the store's error) per poisoned part, fsynced.
    Thread-safe.

    Args:
        directory: created if missing.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._count = 0
        self.spans = sum(spans_in(path.read_bytes()) for path in directory.glob("*.otlp.pb"))
        """Spans set aside so far, files of earlier runs included."""

    def put(self, poisoned: Poisoned) -> Path:
        """Write ``poisoned`` durably and log it at error level; returns the protobuf file's path.

        Raises:
            OSError: the file could not be written (the caller keeps the data in the spool then).
        """
        with self._lock:
            self._count += 1
            stem = f"{time.time_ns()}-{self._count}"
            path = self.directory / f"{stem}.otlp.pb"
            for target, data in (
                (path, poisoned.body),
                (self.directory / f"{stem}.reason.txt", f"tenant: {poisoned.tenant}\n{poisoned.reason}\n".encode()),
            ):
                with target.open("wb") as out:
                    out.write(data)
                    out.flush()
                    os.fsync(out.fileno())
            fsync_directory(self.directory)
            spans = spans_in(poisoned.body)
            self.spans += spans
        log.error(
            "storage refused %d span(s) that passed every check; set aside in %s (tenant %r): %s",
            spans,
            path,
            poisoned.tenant,
            poisoned.reason[:500],
        )
        return path
