"""Prometheus metrics of the ingest path (exposed by the app on ``/metrics``).

The metrics are registered on a registry the caller passes in (``hotspan.metrics`` owns the one of a
process), so several collectors in one test process do not collide. Names follow the Prometheus
conventions: ``_total`` counters, base units (seconds, bytes).
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from collector.rejections import Rejection

REASONS = (
    ("traceId ", "trace_id"),
    ("spanId ", "span_id"),
    ("parentSpanId ", "parent_span_id"),
    ("startTimeUnixNano is missing", "start_time_missing"),
    ("endTimeUnixNano ", "end_before_start"),
    ("startTimeUnixNano ", "time_out_of_range"),
    ("kind ", "kind"),
    ("status.code ", "status_code"),
    ("events[", "event"),
    ("links[", "link"),
)
"""Reason label of a rejection by the start of its message; anything else is ``unreadable``
(an OTLP/JSON span the decoder could not read: wrong types, bad IDs, bad values)."""


def reason_label(rejection: Rejection) -> str:
    """The low-cardinality ``reason`` label of a rejection."""
    for prefix, label in REASONS:
        if rejection.reason.startswith(prefix):
            return label
    return "unreadable"


class IngestMetrics:
    """Counters, gauges and histograms of receivers, queue, spool and storage writes.

    Thread-safe (prometheus_client metrics are). Gauges that mirror state (queue depth, spool size)
    read it through callbacks at scrape time: see :meth:`watch`.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.spans_accepted = Counter(
            "hotspan_ingest_spans_accepted_total",
            "Spans acknowledged to senders (durable in the spool, then inserted).",
            ["protocol"],
            registry=registry,
        )
        self.spans_rejected = Counter(
            "hotspan_ingest_spans_rejected_total",
            "Spans refused individually (OTLP partial_success), by rule broken.",
            ["protocol", "reason"],
            registry=registry,
        )
        self.requests = Counter(
            "hotspan_ingest_requests_total",
            "Export requests by outcome: ok, partial, invalid (400/408/413/415), throttled (429 or"
            " UNAVAILABLE for a full queue), unavailable (503: storage down and spool full or failing),"
            " disconnected (the sender left before its body arrived).",
            ["protocol", "outcome"],
            registry=registry,
        )
        self.truncated_spans = Counter(
            "hotspan_ingest_spans_truncated_total",
            "Spans stored with something cut off by a limit (marked hotspan.truncated).",
            registry=registry,
        )
        self.redacted_values = Counter(
            "hotspan_redacted_values_total",
            "Matches masked in message attributes before storage (collector.redaction), by redaction rule; counted"
            " once per stored group of requests.",
            ["rule"],
            registry=registry,
        )
        self.queue_spans = Gauge(
            "hotspan_ingest_queue_spans", "Spans admitted and not yet acknowledged.", registry=registry
        )
        self.queue_bytes = Gauge(
            "hotspan_ingest_queue_bytes", "Request bytes admitted and not yet acknowledged.", registry=registry
        )
        self.spool_bytes = Gauge("hotspan_spool_bytes", "Size of the on-disk spool.", registry=registry)
        self.spool_segments = Gauge("hotspan_spool_segments", "Batches waiting in the spool.", registry=registry)
        self.spool_spans = Gauge("hotspan_spool_spans", "Spans waiting in the spool.", registry=registry)
        self.spool_oldest_age = Gauge(
            "hotspan_spool_oldest_age_seconds", "Age of the oldest spooled batch (0 when empty).", registry=registry
        )
        self.spool_full = Gauge(
            "hotspan_spool_full",
            "1 once the spool refused a request for lack of room (503; 429 while storage catches up),"
            " until an insert frees room.",
            registry=registry,
        )
        self.storage_available = Gauge(
            "hotspan_storage_available",
            "1 while inserts into ClickHouse succeed, 0 while they fail.",
            registry=registry,
        )
        self.insert_seconds = Histogram(
            "hotspan_storage_insert_seconds",
            "Duration of one insert of spooled spans into ClickHouse (conversion, check and insert).",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
            registry=registry,
        )
        self.insert_failures = Counter(
            "hotspan_storage_insert_failures_total",
            "Inserts of spooled spans into ClickHouse that failed.",
            registry=registry,
        )
        self.insert_retries = Counter(
            "hotspan_storage_insert_retries_total",
            "Insert attempts made after a failure (the spool's contents are retried with back-off).",
            registry=registry,
        )
        self.inserted_spans = Counter(
            "hotspan_storage_inserted_spans_total",
            "Span copies stored in ClickHouse from the spool (first copies and later, different ones).",
            registry=registry,
        )
        self.repeated_spans = Counter(
            "hotspan_storage_repeated_spans_total",
            "Spans not stored again because an equal copy was stored already (a sender's retry, a re-import).",
            registry=registry,
        )
        self.replaced_spans = Counter(
            "hotspan_storage_replaced_spans_total",
            "Spans stored again as a later, different copy (readers show it instead of the earlier one).",
            registry=registry,
        )
        self.inserted_groups = Counter(
            "hotspan_storage_inserted_groups_total", "Groups of spool segments stored in ClickHouse.", registry=registry
        )
        self.dead_letter_spans = Gauge(
            "hotspan_ingest_dead_letter_spans",
            "Spans the store refused although they passed every check, set aside in the dead-letter directory"
            " (data_dir/ingest/dead-letter, importable with `hotspan import`); 0 is the goal.",
            registry=registry,
        )
        self.spooled = Counter(
            "hotspan_spool_written_segments_total", "Spool segments written (one fsync each).", registry=registry
        )

    def watch(self, gauge: Gauge, read: Callable[[], float]) -> None:
        """Make ``gauge`` report ``read()`` at every scrape."""
        gauge.set_function(read)

    def count_rejections(self, protocol: str, rejections: tuple[Rejection, ...] | list[Rejection]) -> None:
        """Add each rejection to ``hotspan_ingest_spans_rejected_total`` under its reason label."""
        for rejection in rejections:
            self.spans_rejected.labels(protocol, reason_label(rejection)).inc()
