"""Arrow layout of a batch of spans as written to ``otel_traces``.

Column names and meanings are the OpenTelemetry Collector ClickHouse exporter's. Times are
nanoseconds since the Unix epoch (UTC); ``Duration`` is nanoseconds; IDs are lowercase hex.
``Events.*`` and ``Links.*`` are the flattened columns of the two ``Nested`` groups: one list per
span, all lists of one group equally long.
"""

from __future__ import annotations

import pyarrow as pa

from storage.tenancy import check_tenant_name

ATTRIBUTES = pa.map_(pa.string(), pa.string())

SPAN_SCHEMA = pa.schema(
    [
        ("Timestamp", pa.timestamp("ns")),
        ("TraceId", pa.string()),
        ("SpanId", pa.string()),
        ("ParentSpanId", pa.string()),
        ("TraceState", pa.string()),
        ("SpanName", pa.string()),
        ("SpanKind", pa.string()),
        ("ServiceName", pa.string()),
        ("ResourceAttributes", ATTRIBUTES),
        ("ScopeName", pa.string()),
        ("ScopeVersion", pa.string()),
        ("SpanAttributes", ATTRIBUTES),
        ("Duration", pa.uint64()),
        ("StatusCode", pa.string()),
        ("StatusMessage", pa.string()),
        ("Events.Timestamp", pa.list_(pa.timestamp("ns"))),
        ("Events.Name", pa.list_(pa.string())),
        ("Events.Attributes", pa.list_(ATTRIBUTES)),
        ("Links.TraceId", pa.list_(pa.string())),
        ("Links.SpanId", pa.list_(pa.string())),
        ("Links.TraceState", pa.list_(pa.string())),
        ("Links.Attributes", pa.list_(ATTRIBUTES)),
    ]
)

TENANT_FIELD = pa.field("Tenant", pa.string())
"""``otel_traces.Tenant`` (migration 0030): the tenant a span was stored for (``storage.tenancy``). Not part of
:data:`SPAN_SCHEMA`, the layout the converters produce: it is one value per request, added right before
the write by :func:`with_tenant`."""

STORED_SCHEMA = SPAN_SCHEMA.append(TENANT_FIELD)
""":data:`SPAN_SCHEMA` plus ``Tenant``: what a writer stores."""

SPAN_KINDS = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
"""``SpanKind`` spellings the exporter writes, indexed by the OTLP enum value."""

STATUS_CODES = ("Unset", "Ok", "Error")
"""``StatusCode`` spellings the exporter writes, indexed by the OTLP enum value."""


def empty_batch() -> pa.Table:
    """A zero-row table with :data:`SPAN_SCHEMA`."""
    return SPAN_SCHEMA.empty_table()


def with_tenant(batch: pa.Table, tenant: str) -> pa.Table:
    """``batch`` (:data:`SPAN_SCHEMA`) with a ``Tenant`` column holding ``tenant`` on every row
    (:data:`STORED_SCHEMA`).

    Raises:
        ValueError: ``tenant`` is not a valid tenant name (``storage.tenancy.TENANT_NAME``), or the batch
            already has a ``Tenant`` column.
    """
    check_tenant_name(tenant)
    if TENANT_FIELD.name in batch.schema.names:
        raise ValueError("batch already has a Tenant column")
    return batch.append_column(TENANT_FIELD, pa.repeat(pa.scalar(tenant, pa.string()), batch.num_rows))
