"""The served ingest path: receivers → bounded queue → fsynced spool (acknowledge) → inserter → ClickHouse.

Flow (one process; threads in brackets):

1. A receiver (event loop + worker thread, or gRPC worker) reserves queue room with
   :meth:`IngestPipeline.admit` before it reads a body, then :meth:`IngestPipeline.receive` checks the
   uncompressed body (:func:`collector.otlp_body.check_body`: one protobuf parse and the per-span rules, no
   attribute work) and sizes the reservation, and the receiver submits it
   (:meth:`IngestPipeline.submit`), getting a future.
2. [spooler] appends every waiting request to one spool segment and fsyncs it (group commit: one
   fsync covers all requests waiting at that moment). From then on a request may be acknowledged:
   it is durable. If no inserter is busy and nothing else is spooled, the acknowledgement waits
   for the insert (at most ``insert_wait_s``), so a lone sender reads its own spans right after the
   answer (as tests and ``hotspan import`` do); otherwise it goes out at once, and senders never wait
   long behind ClickHouse.
3. [inserters, ``insert_threads`` of them] each take the oldest segments nobody has taken (up to
   ``batch_max_spans`` spans), convert them (:class:`~collector.native_writer.NativeBatchWriter`: a
   compiled scan of the protobuf bytes into ``Native`` columns, the same rules again; the rare request
   it does not handle goes through the Python reference; message attributes are redacted first,
   :mod:`collector.redaction`) and store them, each span once
   (:class:`storage.writer.OnceWriter`: a copy already stored is not stored again), then delete the
   segments. On failure the segments stay and are retried with back-off; a crash between insert and
   delete repeats the insert, which then finds every span stored and stores nothing.
   Conversions run in parallel; the stores run one at a time, in the order the groups were claimed
   (:class:`Turnstile`), so that two copies of a span in different groups are checked against each
   other and the later one is stored as the later version.
4. A group the store refuses (it answers with an error, as opposed to not answering) is stored in halves, down to
   single spans (:func:`collector.dead_letter.isolate`); what the store still refuses once it has taken other inserts
   goes to the dead-letter directory ``data_dir/ingest/dead-letter`` with its reason (a file, a metric and a log
   line), so one span the store cannot hold never blocks the spool or the spans grouped with it. A request the
   protobuf runtime cannot read back goes there too, never silently away.

Backpressure (OTLP spec, "Failures" and "Throttling"): while ClickHouse keeps up, spans admitted but
not yet stored are capped at ``queue_max_spans`` and undecoded request bytes in memory at
``queue_max_bytes``: beyond, :class:`QueueFullError` (HTTP 429, gRPC UNAVAILABLE with RetryInfo).
While inserts fail, the spool absorbs the traffic up to ``spool_max_bytes``; beyond,
:class:`StorageUnavailableError` (HTTP 503). Memory holds at most the queue and one group per inserter.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from clickhouse_connect.driver.exceptions import ClickHouseError, OperationalError

from collector.batchwriter import BatchWriter, PreparedBatch, UnreadableRequestError
from collector.dead_letter import DeadLetters, Poisoned, Request, UnprovenRefusal, isolate
from collector.limits import SpanLimits
from collector.metrics import IngestMetrics
from collector.native_writer import NativeBatchWriter
from collector.otlp_body import CheckedRequest, check_body
from collector.redaction import RedactionTable, Redactor
from collector.results import ExportResult, log_answer
from collector.spool import Group, Spool, SpoolFullError
from collector.wire import read_batch, write_batch
from storage.clickhouse import ClickHouse
from storage.tenancy import DEFAULT_TENANT
from storage.writer import StoreOutcome

log = logging.getLogger(__name__)


class OverloadedError(RuntimeError):
    """The collector cannot take the request now; the sender should retry after ``retry_after_s``.

    Attributes:
        status: the HTTP status to answer with.
        retry_after_s: the retry hint, seconds.
    """

    status = 503

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class QueueFullError(OverloadedError):
    """More is waiting than the limits allow (HTTP 429, gRPC UNAVAILABLE with RetryInfo)."""

    status = 429


class StorageUnavailableError(OverloadedError):
    """ClickHouse fails and the spool cannot take more (HTTP 503, gRPC UNAVAILABLE)."""

    status = 503


@dataclass(frozen=True)
class IngestConfig:
    """Sizes and timings of the pipeline.

    Attributes:
        queue_max_bytes: request bytes held in memory, admitted and not yet in the spool.
        queue_max_spans: spans admitted and not yet in ClickHouse, while ClickHouse is available.
        batch_max_spans: most spans converted and inserted in one statement.
        spool_max_bytes: largest total size of the spool.
        insert_threads: inserters working on different groups at once, each with its own ClickHouse
            handle: their conversions overlap, their stores take turns (:class:`Turnstile`).
        retry_after_s: the retry hint given to senders when shedding, and the first insert back-off, seconds.
        retry_max_s: longest back-off between insert attempts while they fail, seconds.
        insert_wait_s: longest time an answer waits for its insert when it waits at all (a lone sender, an idle
            inserter); past it the request is answered from the spool, seconds.
        limits: per-span limits.
        redaction: the redaction table applied to every request before it is stored (``HOTSPAN_REDACTION``);
            None stores message attributes as received.
    """

    queue_max_bytes: int = 64 * 1024 * 1024
    queue_max_spans: int = 200_000
    batch_max_spans: int = 20_000
    spool_max_bytes: int = 1024 * 1024 * 1024
    insert_threads: int = 2
    retry_after_s: float = 1.0
    retry_max_s: float = 5.0
    insert_wait_s: float = 2.0
    limits: SpanLimits = field(default_factory=SpanLimits)
    redaction: RedactionTable | None = None


@dataclass(eq=False)
class Ticket:
    """A request's reservation in the queue, then the request itself until it is spooled."""

    protocol: str
    nbytes: int
    spans: int = 0
    body: bytes = b""
    tenant: str = DEFAULT_TENANT
    result: ExportResult | None = None
    future: Future[ExportResult] = field(default_factory=Future)


class IngestPipeline:
    """See the module docstring. Thread-safe; :meth:`start` before use, :meth:`stop` at the end.

    Args:
        open_handle: opens a ClickHouse handle (one per inserter).
        data_dir: batch files are built in ``data_dir/ingest/work``; the spool is ``data_dir/ingest/spool``.
        config: sizes and timings.
        metrics: where to count.
    """

    def __init__(
        self,
        open_handle: Callable[[], ClickHouse],
        data_dir: Path,
        config: IngestConfig,
        metrics: IngestMetrics,
    ) -> None:
        self._config = config
        self._metrics = metrics
        self._work = data_dir / "ingest" / "work"
        self._work.mkdir(parents=True, exist_ok=True)
        for leftover in self._work.iterdir():
            # Files of a previous run that never reached the spool: nobody was told they were stored.
            leftover.unlink()
        self.spool = Spool(data_dir / "ingest" / "spool", config.spool_max_bytes)
        self.dead_letters = DeadLetters(data_dir / "ingest" / "dead-letter")
        self._handles = [open_handle() for _ in range(config.insert_threads)]
        redactor = Redactor(config.redaction) if config.redaction is not None else None
        self._writers: list[BatchWriter] = [
            NativeBatchWriter(handle, config.limits, redactor) for handle in self._handles
        ]
        for rule in config.redaction.rules if config.redaction is not None else ():
            # Every rule's series from the start, at 0: a rate over it needs no first match to exist.
            metrics.redacted_values.labels(rule.name)
        self._lock = threading.Condition()
        self._pending: deque[Ticket] = deque()
        self._queued_bytes = 0
        self._queued_spans = 0
        self._wake_inserter = threading.Event()
        self._claiming = threading.Lock()
        self._turns = Turnstile()
        self._inserting = 0
        self._waiting: dict[int, tuple[list[Ticket], float]] = {}
        self._healthy = True
        self._spool_refused = False
        self._next_try = 0.0
        self._backoff_s = 0.0
        self._stored_at = 0.0
        self._refused_at: dict[str, float] = {}
        self._stopping = False
        self._stop_inserting = False
        self._spooler = threading.Thread(target=self._spool_loop, name="hotspan-ingest-spool", daemon=True)
        self._inserters = [
            threading.Thread(target=self._insert_loop, args=(writer,), name=f"hotspan-ingest-insert-{i}", daemon=True)
            for i, writer in enumerate(self._writers)
        ]
        metrics.watch(metrics.queue_bytes, lambda: self._queued_bytes)
        metrics.watch(metrics.queue_spans, lambda: self._queued_spans + self.spool.spans)
        metrics.watch(metrics.spool_bytes, lambda: self.spool.bytes)
        metrics.watch(metrics.spool_segments, lambda: self.spool.segments)
        metrics.watch(metrics.spool_spans, lambda: self.spool.spans)
        metrics.watch(metrics.spool_oldest_age, self.spool.oldest_age_s)
        metrics.watch(metrics.spool_full, lambda: float(self._spool_refused))
        metrics.watch(metrics.storage_available, lambda: float(self._healthy))
        metrics.watch(metrics.dead_letter_spans, lambda: self.dead_letters.spans)

    def start(self) -> None:
        """Start the spooler and the inserter (a spool left by an earlier run is inserted at once)."""
        for thread in (self._spooler, *self._inserters):
            thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Spool every admitted request, finish the insert in progress, stop, close the handle.

        Segments not inserted yet stay in the spool for the next start.
        """
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
        self._spooler.join(timeout_s)
        # Only now: the spooler's last segments may have requests waiting for an inserter.
        self._stop_inserting = True
        self._wake_inserter.set()
        for inserter in self._inserters:
            inserter.join(timeout_s)
        for handle in self._handles:
            handle.close()

    @property
    def retry_after_s(self) -> float:
        """The retry hint given to senders when shedding, seconds."""
        return self._config.retry_after_s

    @property
    def inserting_ok(self) -> bool:
        """Whether the last insert into ClickHouse succeeded (True before the first). Non-blocking."""
        return self._healthy

    @property
    def spooled_spans(self) -> int:
        """Spans acknowledged and waiting in the spool. Non-blocking."""
        return self.spool.spans

    # -- admission (any thread) -------------------------------------------------------------------

    def admit(self, protocol: str, nbytes: int) -> Ticket:
        """Reserve ``nbytes`` of queue room for a request about to be read.

        Raises:
            QueueFullError: too much is waiting (an empty pipeline admits anything).
            StorageUnavailableError: ClickHouse fails and the spool is full, or the pipeline is stopping.
        """
        with self._lock:
            self._check_room(nbytes, 0)
            self._queued_bytes += nbytes
            return Ticket(protocol, nbytes)

    def grow(self, ticket: Ticket, nbytes: int) -> None:
        """Add ``nbytes`` to a reservation while its body arrives (or inflates), so room is taken for bytes
        actually held, never for a length a sender merely declared.

        Raises:
            QueueFullError, StorageUnavailableError: the bytes do not fit now; the reservation is kept (the
                caller releases it).
        """
        with self._lock:
            self._check_room(nbytes, 0, own=ticket.nbytes)
            self._queued_bytes += nbytes
            ticket.nbytes += nbytes

    def _check_room(self, nbytes: int, spans: int, own: int = 0) -> None:
        """Raise unless ``nbytes`` and ``spans`` more fit, ``own`` of the queued bytes being the asker's own (a
        queue holding nothing else admits anything); called with the lock held."""
        retry = self._config.retry_after_s
        if self._stopping:
            raise StorageUnavailableError("collector is shutting down", retry)
        if not self.spool.has_room(self._queued_bytes + nbytes):
            self._spool_refused = True
            if not self._healthy:
                raise StorageUnavailableError("storage unavailable and the spool is full; retry later", retry)
            raise QueueFullError("ingest spool full while storage catches up; retry later", retry)
        if self._queued_bytes > own and self._queued_bytes + nbytes > self._config.queue_max_bytes:
            raise QueueFullError(
                f"ingest queue full ({self._queued_bytes} of {self._config.queue_max_bytes} bytes); retry later", retry
            )
        backlog = self._queued_spans + self.spool.spans
        if self._healthy and backlog and backlog + spans > self._config.queue_max_spans:
            raise QueueFullError(
                f"ingest backlog full ({backlog} of {self._config.queue_max_spans} spans not stored yet); retry later",
                retry,
            )

    def resize(self, ticket: Ticket, nbytes: int, spans: int) -> None:
        """Set the reservation to the decoded body's size and span count.

        Raises:
            QueueFullError, StorageUnavailableError: the request does not fit now; the reservation
                is released.
        """
        with self._lock:
            self._queued_bytes -= ticket.nbytes
            self._queued_spans -= ticket.spans
            ticket.nbytes = ticket.spans = 0
            self._check_room(nbytes, spans)
            self._queued_bytes += nbytes
            self._queued_spans += spans
            ticket.nbytes, ticket.spans = nbytes, spans

    def receive(self, ticket: Ticket, raw: bytes, media: str, max_request_spans: int) -> CheckedRequest:
        """Check an admitted request's uncompressed body (:func:`collector.otlp_body.check_body`) and size its
        reservation (:meth:`resize`): the one receive step of every protocol. Blocking, CPU-bound.

        Raises:
            PayloadError: the body is not a valid request (400) or holds too many spans (413).
            QueueFullError, StorageUnavailableError: the request does not fit now.
            Whatever the error, the reservation is released.
        """
        try:
            checked = check_body(raw, media, max_request_spans, self._config.limits)
            self.resize(ticket, len(checked.body), checked.spans)
        except BaseException:
            self.release(ticket)
            raise
        return checked

    def release(self, ticket: Ticket) -> None:
        """Give back a reservation that will not be submitted."""
        with self._lock:
            self._queued_bytes -= ticket.nbytes
            self._queued_spans -= ticket.spans
            ticket.nbytes = ticket.spans = 0

    def submit(
        self, ticket: Ticket, body: bytes, result: ExportResult, tenant: str = DEFAULT_TENANT
    ) -> Future[ExportResult]:
        """Queue a checked, serialized ``ExportTraceServiceRequest`` (sized by :meth:`resize`) whose
        valid spans are stored for ``tenant`` (the sender's, from its token: ``storage.tenancy``).

        Returns:
            A future that resolves to ``result`` once the request is durable in the spool (at once
            when it has nothing to store), or raises :class:`StorageUnavailableError` (503).
        """
        ticket.body, ticket.result, ticket.tenant = body, result, tenant
        if not result.accepted:
            self._finish(ticket, result)
            return ticket.future
        with self._lock:
            self._pending.append(ticket)
            self._lock.notify()
        return ticket.future

    def _finish(self, ticket: Ticket, outcome: ExportResult | Exception) -> None:
        self.release(ticket)
        ticket.body = b""
        if isinstance(outcome, ExportResult):
            self._metrics.spans_accepted.labels(ticket.protocol).inc(outcome.accepted)
            self._metrics.count_rejections(ticket.protocol, outcome.rejections)
            log_answer(outcome)
            ticket.future.set_result(outcome)
        else:
            ticket.future.set_exception(outcome)

    # -- spooler thread ---------------------------------------------------------------------------

    def _spool_loop(self) -> None:
        while True:
            with self._lock:
                overdue: list[list[Ticket]] = []
                while not self._pending and not self._stopping and not overdue:
                    self._lock.wait(min(0.5, self._config.insert_wait_s / 4))
                    overdue = self._take_overdue()
                tickets = list(self._pending)
                self._pending.clear()
            for waited in overdue:
                self._acknowledge(waited)
            if tickets:
                self._spool(tickets)
            elif not overdue:
                return

    def _take_overdue(self) -> list[list[Ticket]]:
        """The requests that have waited ``insert_wait_s`` for their insert, removed from the waiting ones: they are
        durable in the spool, and a slow ClickHouse must not hold their answer past the sender's timeout. Called
        with the lock held."""
        now = time.monotonic()
        overdue = [seq for seq, (_, since) in self._waiting.items() if now - since >= self._config.insert_wait_s]
        return [self._waiting.pop(seq)[0] for seq in overdue]

    def _spool(self, tickets: list[Ticket]) -> None:
        path = self._work / f"spooling-{time.monotonic_ns()}.bin"
        with path.open("wb") as out:
            write_batch(out, [(t.body, t.tenant) for t in tickets])
        try:
            segment = self.spool.append(path, sum(t.spans for t in tickets))
        except (SpoolFullError, OSError) as exc:
            path.unlink(missing_ok=True)
            self._spool_refused = True
            log.error("cannot spool %d requests: %s", len(tickets), exc)
            failure = StorageUnavailableError(f"cannot store the request durably: {exc}", self._config.retry_after_s)
            for ticket in tickets:
                self._finish(ticket, failure)
            return
        self._metrics.spooled.inc()
        with self._lock:
            wait = self._healthy and not self._inserting and self.spool.segments == 1
            if wait:
                self._waiting[segment.sequence] = (tickets, time.monotonic())
        self._wake_inserter.set()
        if not wait:
            self._acknowledge(tickets)

    def _acknowledge(self, tickets: list[Ticket]) -> None:
        for ticket in tickets:
            assert ticket.result is not None
            self._finish(ticket, ticket.result)

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until every request admitted so far is inserted into ClickHouse (for tests and tools
        that read right after sending concurrently); ``False`` if ``timeout_s`` passed first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._pending and not self._queued_bytes and not self.spool.segments:
                    return True
            time.sleep(0.01)
        return False

    # -- inserter thread --------------------------------------------------------------------------

    def _insert_loop(self, writer: BatchWriter) -> None:
        while not self._stop_inserting:
            group = None
            if self.spool.segments and (self._healthy or time.monotonic() >= self._next_try):
                with self._lock:
                    self._inserting += 1
                with self._claiming:
                    group = self.spool.next_group(self._config.batch_max_spans)
                    turn = self._turns.take() if group is not None else -1
                if group is not None:
                    self._insert(group, writer, turn)
                with self._lock:
                    self._inserting -= 1
                    done = {s.sequence for s in group.segments} if group is not None else set()
                    waiting = [self._waiting.pop(seq)[0] for seq in done & self._waiting.keys()]
                for tickets in waiting:
                    # Inserted, or kept in the spool after a failure: durable either way.
                    self._acknowledge(tickets)
            if group is None:
                self._wake_inserter.wait(0.2)
                self._wake_inserter.clear()
        with self._lock:
            waiting = [tickets for tickets, _ in self._waiting.values()]
            self._waiting.clear()
        for tickets in waiting:
            self._acknowledge(tickets)

    def _insert(self, group: Group, writer: BatchWriter, turn: int) -> None:
        path = self._work / f"group-{group.token}.bin"
        started = time.perf_counter()
        try:
            count = 0
            with path.open("wb") as out:
                # One segment in memory at a time: groups are large, segments small.
                for segment in group.segments:
                    count += write_batch(out, read_batch(segment.path.read_bytes()), first_index=count)
            pre: list[list] = [[] for _ in range(count)]
            if not self._healthy:
                self._metrics.insert_retries.inc()
            prepared = writer.prepare(path, pre)
        except BaseException:
            self._turns.skip(turn)
            path.unlink(missing_ok=True)
            raise
        try:
            with self._turns.turn(turn):
                outcome = self._store(group, writer, prepared)
        except (ClickHouseError, UnprovenRefusal, OSError) as exc:
            self.spool.release_group(group)
            self._refused_at.setdefault(group.token, time.monotonic())
            self._metrics.insert_failures.inc()
            self._healthy = False
            self._backoff_s = min(max(2 * self._backoff_s, self._config.retry_after_s), self._config.retry_max_s)
            self._next_try = time.monotonic() + self._backoff_s
            log.warning("insert of %d spooled spans failed (retry in %.1f s): %s", group.spans, self._backoff_s, exc)
            return
        finally:
            path.unlink(missing_ok=True)
        self._stored_at = time.monotonic()
        self._refused_at.pop(group.token, None)
        self._metrics.insert_seconds.observe(time.perf_counter() - started)
        self.spool.finish_group(group)
        self._spool_refused = False
        self._metrics.inserted_groups.inc()
        self._metrics.inserted_spans.inc(outcome.stored)
        self._metrics.repeated_spans.inc(outcome.repeated)
        self._metrics.replaced_spans.inc(outcome.replaced)
        self._metrics.truncated_spans.inc(prepared.truncated)
        for rule, count in prepared.redacted.items():
            self._metrics.redacted_values.labels(rule).inc(count)
        if not self._healthy:
            log.info("ClickHouse inserts succeed again; %d spool segments left", self.spool.segments)
        self._healthy, self._backoff_s = True, 0.0

    def _store(self, group: Group, writer: BatchWriter, prepared: PreparedBatch) -> StoreOutcome:
        """Store a prepared group; when the store refuses it, store it in parts and set aside what it still refuses
        (:mod:`collector.dead_letter`); a request that cannot be read back is set aside too. Called in the group's
        turn.

        Raises:
            ClickHouseError: the store does not answer, or refuses the group as a whole and in parts before it has
                shown that it takes other inserts (:class:`~collector.dead_letter.UnprovenRefusal`); the group stays
                in the spool.
            OSError: a part could not be written to the dead-letter directory; the group stays in the spool.
        """
        try:
            outcome = writer.store(prepared)
            poisoned = _unreadable(prepared)
        except OperationalError:
            raise
        except ClickHouseError as refusal:
            refused_at = self._refused_at.get(group.token)
            proven = refused_at is not None and self._stored_at > refused_at
            outcomes: list[StoreOutcome] = []
            # Each part stored reports its own unreadable requests (a request is in one stored part or one refused).
            poisoned = []

            def store_part(part: Sequence[Request]) -> None:
                stored, unreadable = self._store_part(writer, part)
                outcomes.append(stored)
                poisoned.extend(unreadable)

            requests = read_batch(prepared.path.read_bytes())
            poisoned.extend(isolate(requests, store_part, proven, str(refusal)))
            outcome = StoreOutcome(
                sum(o.stored for o in outcomes), sum(o.repeated for o in outcomes), sum(o.replaced for o in outcomes)
            )
        for part in poisoned:
            self.dead_letters.put(part)
        return outcome

    def _store_part(self, writer: BatchWriter, part: Sequence[Request]) -> tuple[StoreOutcome, list[Poisoned]]:
        """Prepare and store ``part`` of a group (requests, or pieces of one) on its own; returns what it stored and
        its requests that cannot be read back.

        Raises:
            ClickHouseError: the store refused it or did not answer.
        """
        path = self._work / f"part-{time.monotonic_ns()}.bin"
        try:
            with path.open("wb") as out:
                write_batch(out, part)
            prepared = writer.prepare(path, [[] for _ in part])
            stored = writer.store(prepared)
        finally:
            path.unlink(missing_ok=True)
        return stored, _unreadable(prepared, part)


def _unreadable(prepared: PreparedBatch, requests: Sequence[Request] | None = None) -> list[Poisoned]:
    """The requests of a prepared batch that the protobuf runtime could not read back, with the reason. ``requests``:
    the batch's requests when the caller holds them; else its file is read, and only when one is unreadable (the
    common batch costs no read)."""
    if not any(isinstance(result, UnreadableRequestError) for result in prepared.results):
        return []
    held = requests if requests is not None else read_batch(prepared.path.read_bytes())
    return [
        Poisoned(body, tenant, str(result))
        for (body, tenant), result in zip(held, prepared.results, strict=True)
        if isinstance(result, UnreadableRequestError)
    ]


class Turnstile:
    """Lets holders of numbered turns through one at a time, in number order (a ticket lock). Thread-safe.

    Every number :meth:`take` hands out must be used once, by :meth:`turn` or :meth:`skip`, or later numbers
    wait forever.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._next = 0
        self._serving = 0

    def take(self) -> int:
        """The next turn number."""
        with self._changed:
            self._next += 1
            return self._next - 1

    @contextmanager
    def turn(self, number: int) -> Iterator[None]:
        """Wait until every earlier turn is over, hold this one for the ``with`` block, then end it."""
        with self._changed:
            self._changed.wait_for(lambda: self._serving == number)
        try:
            yield
        finally:
            with self._changed:
                self._serving += 1
                self._changed.notify_all()

    def skip(self, number: int) -> None:
        """End turn ``number`` without using it (after waiting for the earlier ones)."""
        with self.turn(number):
            pass


__all__ = [
    "IngestConfig",
    "IngestPipeline",
    "OverloadedError",
    "QueueFullError",
    "StorageUnavailableError",
    "Ticket",
    "Turnstile",
]
