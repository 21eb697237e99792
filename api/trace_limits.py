"""How much of one trace a read returns at once (the answer is built off the event loop: :mod:`api.read_pool`).

A stored trace may hold a million spans; building its answer whole costs minutes and gigabytes (issue 17
measured 300 s and 5.7 GB for a 1M-span trace). Every by-ID trace read returns at most
:attr:`TraceReadLimits.max_spans` spans (``HOTSPAN_MAX_TRACE_SPANS``): ``/api/v1/traces/{id}`` in pages
(``page_token``/``limit``, with the trace's ``span_count`` and the ``next_page_token``), the Jaeger APIs the first spans
by start with a warning. Each truncated answer is counted in ``hotspan_trace_reads_truncated_total{api}``.
Grafana Tempo bounds the other end: spans past its ``max_bytes_per_trace`` are refused at ingest and counted in
``tempo_discarded_spans_total{reason="trace_too_large"}``; Hotspan stores every span and bounds the reads.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from query.store import MAX_TRACE_SPANS


class TraceReadLimits:
    """The span bound of by-ID trace reads and its counter.

    Args:
        max_spans: most spans one answer holds (default ``storage.reader.MAX_TRACE_SPANS``).
        registry: where ``hotspan_trace_reads_truncated_total`` is registered; None for no counting (tests
            mounting a router alone).
    """

    def __init__(self, max_spans: int = MAX_TRACE_SPANS, registry: CollectorRegistry | None = None) -> None:
        self.max_spans = max_spans
        self._truncated = (
            Counter(
                "hotspan_trace_reads_truncated_total",
                "By-ID trace reads that answered part of a trace larger than HOTSPAN_MAX_TRACE_SPANS (a page of"
                " /api/v1/traces/{id}, or the first spans by start in the Jaeger APIs).",
                ["api"],
                registry=registry,
            )
            if registry is not None
            else None
        )

    def count_truncated(self, api: str) -> None:
        """Count one truncated answer of ``api`` (``v1``, ``jaeger_v1``, ``jaeger_v3``, ``tempo``)."""
        if self._truncated is not None:
            self._truncated.labels(api).inc()

    def warning(self, trace_id: str, total: int) -> str:
        """What a capped answer says about trace ``trace_id`` of ``total`` spans."""
        return (
            f"trace {trace_id} has {total} spans; the first {self.max_spans} by start time are returned"
            " (HOTSPAN_MAX_TRACE_SPANS; /api/v1/traces/{id} pages through all of them)"
        )
