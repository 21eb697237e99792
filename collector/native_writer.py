"""Storing batch files through the compiled scanner: protobuf bytes → ClickHouse ``Native`` blocks.

Converting a span inside ClickHouse from its ``Protobuf`` input format cost about 30 µs of CPU, most
of it in a large SQL expression (that path was removed: ``benchmarks/README.md``, items 1 and 5), and the
Python one (:func:`collector.batch.to_batch`) costs more. The C extension :mod:`collector._otlp_rows`
walks the protobuf wire format of a request once and writes its ``otel_traces`` rows as one block of
ClickHouse's columnar ``Native`` format, 2.5-3.3 µs per span, and the insert takes the bytes as they
are, over HTTP or into the embedded engine alike. Native rather than ``RowBinary``: ClickHouse parses
the latter row by row, 7.6-11 µs per span of these rows against 1.5 µs for the same block in Native
(``LowCardinality`` columns are sent as ``String``, which the insert casts:
``input_format_native_allow_types_conversion``, on by default).

The scanner only handles CLEAN requests: every span valid and unique, every resource named,
nothing over a :class:`~collector.limits.SpanLimits` limit, attribute values of the usual shapes
(scalars, arrays of scalars). Anything else, an "anomaly", sends the whole request through
:func:`collector.batchwriter.python_request`, which stays the reference for answers, rejections,
warnings and truncation. ``tests/collector/test_native_rows.py`` holds both to the same rows.

Message attributes are redacted (:mod:`collector.redaction`) before either path stores a request: the scanner
reports a request holding a key the redaction table may name (:data:`REDACTION_CANDIDATE`), which is redacted and
converted again, and every request the Python reference takes is redacted first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

try:
    from collector import _otlp_rows
except ImportError as exc:  # a checkout used without `pip install -e .`
    raise ImportError(
        "collector._otlp_rows is not built: run `pip install -e .` (or `make venv`) with gcc and the Python headers"
    ) from exc
from collector.batch import DEFAULT_LIMITS
from collector.batchwriter import PreparedBatch, UnreadableRequestError, python_request
from collector.limits import SpanLimits
from collector.redaction import Redactor
from collector.rejections import Rejection
from collector.results import ExportResult, export_result
from collector.wire import read_batch
from storage.clickhouse import ClickHouse
from storage.tenancy import check_tenant_name
from storage.writer import OnceWriter, StoreOutcome

COLUMNS: tuple[str, ...] = _otlp_rows.COLUMNS
"""The ``otel_traces`` columns of the scanner's rows, in order (all but the ALIAS columns)."""

ROW_FORMAT = "Native"

REDACTION_CANDIDATE: str = _otlp_rows.REDACTION_CANDIDATE
""":func:`native_rows`' answer for a request with a key or event name that ``redactor`` may name."""


def native_rows(
    body: bytes, tenant: str, limits: SpanLimits, redactor: Redactor | None = None
) -> tuple[int, bytes] | str:
    """The scanner on one serialized ``ExportTraceServiceRequest``.

    Returns:
        ``(spans, rows)`` for a clean request: every span stored, nothing rejected, warned about or
        cut, ``rows`` one ``Native`` block of :data:`COLUMNS` with ``Tenant = tenant`` (``b""`` without
        spans); otherwise a ``str`` naming the anomaly that sends the request to Python, which is
        :data:`REDACTION_CANDIDATE` when a span or event attribute key or an event name begins with
        a literal start of ``redactor``'s patterns (the request must be redacted before it is stored).
        Never raises for any bytes (MemoryError aside). Holds the GIL: about 1.3 ms per request of
        512 spans on a quiet host.
    """
    named = (redactor.named_keys, redactor.named_events) if redactor is not None else ((), ())
    return _otlp_rows.convert(
        body, tenant, limits.max_attributes, limits.max_value_chars, limits.max_events, limits.max_links, *named
    )


def native_check(body: bytes, limits: SpanLimits = DEFAULT_LIMITS) -> int | str:
    """The scanner's check of one serialized ``ExportTraceServiceRequest``, writing nothing.

    Returns:
        The span count when :func:`collector.batch.check_request` would accept every span without a
        rejection or warning (none cut by ``limits`` either) and the scanner handles the request's shapes;
        otherwise a ``str`` naming the anomaly (also for an array, bytes or number value that may pass
        ``limits.max_value_chars``: the reference measures it). Never raises for any bytes.
    """
    return _otlp_rows.check(body, limits.max_attributes, limits.max_value_chars, limits.max_events, limits.max_links)


def native_shape(body: bytes) -> tuple[int, int, int] | None:
    """``(resource_spans, scope_spans, spans)`` counted in a serialized ``ExportTraceServiceRequest`` from its
    field tags and lengths alone (about 3 ns per byte, nothing decoded), or None for malformed bytes. Never
    raises for any bytes."""
    return _otlp_rows.shape(body)


class RequestConverter:
    """The conversion every stored span goes through, served or not: redaction, then the compiled scanner, and for
    the rare request it does not handle the Python reference (module docstring). Needs no database; thread-safe.

    Args:
        limits: per-span limits.
        redactor: masks message attributes of every request before it is converted; None: stored as received.
    """

    def __init__(self, limits: SpanLimits, redactor: Redactor | None = None) -> None:
        self._limits = limits
        self._redactor = redactor

    def convert(
        self,
        requests: Sequence[tuple[bytes, str]],
        pre_rejections: Sequence[Sequence[Rejection]],
        path: Path | None = None,
    ) -> PreparedBatch:
        """Check and convert ``requests`` (serialized ``ExportTraceServiceRequest`` and tenant pairs), each with
        the decoder's placeholders for the spans it could not read (OTLP/JSON; empty otherwise); ``path`` is the
        batch file they came from, if any.

        Raises:
            ValueError: a request's tenant is not a valid tenant name.
        """
        results: list[ExportResult | UnreadableRequestError] = []
        chunks: list[bytes] = []
        tables = []
        truncated = 0
        redacted: Counter[str] = Counter()
        for (body, tenant), pre in zip(requests, pre_rejections, strict=True):
            # Decoder placeholders (OTLP/JSON) need the reference's skipping and messages.
            converted = (
                native_rows(body, check_tenant_name(tenant), self._limits, self._redactor)
                if not pre
                else "pre-rejections"
            )
            # The scanner stops at the first anomaly, maybe before a named key: whatever it leaves to Python is
            # redacted too, when its bytes hold a literal start.
            if (
                self._redactor is not None
                and not isinstance(converted, tuple)
                and (converted == REDACTION_CANDIDATE or self._redactor.may_name(body))
            ):
                readable, masked = self._redactor.redact_body(body)
                # Bytes protobuf cannot read stay with the Python reference, which reports them unread: a second
                # conversion must never take a request that could not be redacted.
                if readable is not None:
                    body = readable
                    redacted += masked
                    if converted == REDACTION_CANDIDATE:
                        converted = native_rows(body, tenant, self._limits)
            if isinstance(converted, tuple):
                spans, rows = converted
                chunks.append(rows)
                results.append(export_result(spans, [], []))
                continue
            result, table, cut = python_request(body, tenant, pre, self._limits)
            results.append(result)
            truncated += cut
            if table is not None:
                tables.append(table)
        return PreparedBatch(path, results, truncated, tables, native_rows=b"".join(chunks), redacted=redacted)


class NativeBatchWriter:
    """:class:`~collector.batchwriter.BatchWriter` through :class:`RequestConverter`; any ClickHouse.

    Args:
        ch: a handle of its own (calls on one handle are serialized).
        limits: per-span limits.
        redactor: masks message attributes of every request before it is converted; None: stored as received.
    """

    def __init__(self, ch: ClickHouse, limits: SpanLimits, redactor: Redactor | None = None) -> None:
        self._once = OnceWriter(ch)
        self._converter = RequestConverter(limits, redactor)

    def prepare(self, path: Path, pre_rejections: Sequence[Sequence[Rejection]]) -> PreparedBatch:
        """Check and convert the batch file at ``path``; needs no database.

        Raises:
            ValueError: a request's tenant is not a valid tenant name.
            collector.wire.WireError: the file is not a batch file.
        """
        return self._converter.convert(read_batch(path.read_bytes()), pre_rejections, path)

    def store(self, batch: PreparedBatch) -> StoreOutcome:
        """Insert the scanner's rows and the Python ones together, each span once."""
        return self._once.store(batch.native_rows, COLUMNS, batch.python_tables)
