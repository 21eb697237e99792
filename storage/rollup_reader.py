"""Reading Hotspan's per-minute rollups: RED per (service, operation, kind) and the service graph.

The SQL lives in :mod:`storage.rollup_sql`. Windows are ns since the Unix epoch and are read at minute
granularity (the first minute is the one ``start_ns`` falls in). Every read takes a keyword-only ``tenant``
(:mod:`storage.tenancy`): a name reads that tenant's rows, ``None`` every tenant (admin only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

import polars as pl

from storage import rollup_sql
from storage.clickhouse import ClickHouse
from storage.tenancy import tenant_condition, tenant_parameters

TENANT_CONDITION = tenant_condition()
"""Tenant condition of every rollup read; rollups store the folded tenant name, never ``''``."""

GroupBy = Literal["service", "operation"]

QUANTILE_COLUMNS = ("p50_ns", "p95_ns", "p99_ns")

ALL_GROUPS = 2**64 - 1
"""The group limit of a read that names none: every group."""


@dataclass(frozen=True)
class RedQuery:
    """A RED read.

    Attributes:
        group_by: ``service`` (one group per service, all selected kinds together) or ``operation`` (one per
            service, span name and span kind).
        start_ns, end_ns: the window, ns since the Unix epoch.
        step_s: series resolution in seconds; a multiple of 60 (rollups are per minute), at least 60.
        service, operation: exact filters, ``None`` for all.
        span_kind: ``Server``, ``Client``, ``Producer``, ``Consumer``, ``Internal`` or ``Unspecified``; ``None``
            for every kind.
        limit: most groups of their own (those with the most calls, ties by keys); the others fold into one
            overflow row. ``None``: every group.
    """

    group_by: GroupBy
    start_ns: int
    end_ns: int
    step_s: int = 60
    service: str | None = None
    operation: str | None = None
    span_kind: str | None = None
    limit: int | None = None


@dataclass(frozen=True)
class RedResult:
    """RED of a :class:`RedQuery`.

    Attributes:
        totals: one row per group over the whole window: ``overflow`` (Boolean: the row of the groups beyond the
            query's limit, its keys empty, last), the group keys (``service``; plus ``operation`` and
            ``span_kind`` by operation), ``calls``, ``errors`` (UInt64), ``duration_sum_ns``,
            ``duration_max_ns`` (UInt64 ns), ``p50_ns``, ``p95_ns``, ``p99_ns`` (Float64 ns, null when unknown).
            Sorted by overflow, then the keys.
        series: one row per group and step with calls: ``overflow``, the keys, ``bucket_start_ns`` (Int64 ns,
            aligned to ``step_s``), ``calls``, ``errors``, ``p50_ns``, ``p95_ns``, ``p99_ns``. Sorted by overflow,
            keys, then time.
    """

    totals: pl.DataFrame
    series: pl.DataFrame


@dataclass(frozen=True)
class RedSelection:
    """The spans an SLO is about: a service, optionally one operation (span name) and one span kind."""

    service: str
    operation: str | None = None
    span_kind: str | None = None


@dataclass(frozen=True)
class RedCounts:
    """Counts of a :class:`RedSelection` over a window.

    Attributes:
        calls, errors: spans, and spans with status ``Error``.
        buckets: spans per histogram bucket, keyed by inclusive upper bound in ms
            (:data:`storage.rollup_sql.SPAN_BUCKETS_MS`, ``+Inf`` as ``float("inf")``); not cumulative.
    """

    calls: int
    errors: int
    buckets: dict[float, int]

    def slower_than(self, threshold_ms: float) -> int:
        """Spans slower than ``threshold_ms``, which must be one of the bucket bounds (or the count is of
        spans above the next lower bound)."""
        return sum(count for bound, count in self.buckets.items() if bound > threshold_ms)


@dataclass(frozen=True)
class EdgeScope:
    """Which calls of the service graph a reader wants (:data:`storage.rollup_sql.EDGE_SCOPE_FILTERS`); ``None``
    or empty leaves a field open.

    Attributes:
        service: calls made or received by this service.
        operation: calls whose client or server span has this name.
        request_tenant: calls of requests whose spans name this tenant (``tenant_id``), not the signed-in one.
    """

    service: str | None = None
    operation: str | None = None
    request_tenant: str | None = None

    def parameters(self) -> dict[str, str]:
        """The set fields, stripped, by name (the bound parameters of their conditions)."""
        values = {"service": self.service, "operation": self.operation, "request_tenant": self.request_tenant}
        return {name: value.strip() for name, value in values.items() if value and value.strip()}

    def conditions(self) -> list[str]:
        """The SQL conditions of the set fields, with the tenant condition of the summary read filled in."""
        return [rollup_sql.EDGE_SCOPE_FILTERS[name].format(conditions=TENANT_CONDITION) for name in self.parameters()]


@runtime_checkable
class RollupReader(Protocol):
    """Read side of the rollups. Thread-safe; empty results, never ``None``, when nothing matches.

    Raises (every method): ValueError for a ``tenant`` that is not a valid tenant name.
    """

    def red(self, query: RedQuery, *, tenant: str | None) -> RedResult:
        """RED totals and series of ``query`` (see :class:`RedResult`)."""
        ...

    def red_counts(self, selection: RedSelection, start_ns: int, end_ns: int, *, tenant: str | None) -> RedCounts:
        """Calls, errors and duration buckets of ``selection`` over a window."""
        ...

    def rollup_services(self, start_ns: int, end_ns: int, *, tenant: str | None) -> list[str]:
        """Services that stored spans in the window, sorted."""
        ...

    def rollup_time_range(self, *, tenant: str | None) -> tuple[int, int] | None:
        """``(start of the first minute, end of the last minute)`` holding spans, ns; None when there are none."""
        ...

    def service_graph(
        self,
        start_ns: int,
        end_ns: int,
        *,
        tenant: str | None,
        scope: EdgeScope | None = None,
        limit: int | None = None,
    ) -> pl.DataFrame:
        """Edges over the window: ``overflow`` (Boolean), ``client``, ``server``, ``connection_type`` (String),
        ``calls``, ``errors`` (UInt64), ``client_p50_ns`` ... ``client_p99_ns`` and ``server_p50_ns`` ...
        ``server_p99_ns`` (Float64 ns, null for a side without spans). The ``limit`` edges with the most calls
        (ties by names; ``None``: every edge) have a row each, sorted by client, server, connection type; the
        others fold into one last row with ``overflow`` true and empty names. With a ``scope``, only its calls
        count (read from the calls, not the minute rollup)."""
        ...

    def edge_examples(
        self,
        client: str,
        server: str,
        start_ns: int,
        end_ns: int,
        *,
        tenant: str | None,
        limit: int = 10,
        scope: EdgeScope | None = None,
    ) -> pl.DataFrame:
        """Traces with a call ``client → server`` (in ``scope`` when given) starting in the window (exact bounds,
        not minutes), failed calls first, then the slowest: ``trace_id``, ``start_time_unix_nano`` (Int64 ns),
        ``client_operation``, ``server_operation``, ``client_duration_ns``, ``server_duration_ns`` (Int64 ns, null
        for a side without a span), ``failed`` (Boolean). One row per trace, at most ``limit``."""
        ...

    def stage_counts(
        self, service: str, stage: str, threshold_ns: int, start_ns: int, end_ns: int, *, tenant: str | None
    ) -> tuple[int, int]:
        """``(requests, slow)``: requests with root service ``service`` starting in the window, and those whose
        critical path spent more than ``threshold_ns`` in ``stage`` (from the trace pipeline's summaries)."""
        ...

    def hotspot_counts(self, trace_ids: list[str], *, tenant: str | None) -> list[tuple[str, str, int]]:
        """``(service, reason, spans)`` of the hotspot spans the trace pipeline flagged in ``trace_ids``."""
        ...


class ClickHouseRollupReader:
    """:class:`RollupReader` over the rollup tables of migrations 0021-0026."""

    def __init__(self, ch: ClickHouse) -> None:
        self._ch = ch

    def red(self, query: RedQuery, *, tenant: str | None) -> RedResult:
        if query.step_s < 60 or query.step_s % 60:
            raise ValueError(f"step_s must be a multiple of 60 (rollups are per minute), got {query.step_s}")
        columns = [key.split(" AS ", 1) for key in rollup_sql.RED_KEYS[query.group_by]]
        names = [name for _, name in columns]
        conditions, parameters = _red_conditions(query.service, query.operation, query.span_kind)
        parameters |= {"start_ns": query.start_ns, "end_ns": query.end_ns, "step_s": query.step_s}
        parameters |= tenant_parameters(tenant) | {"limit": _limit(query.limit)}
        fields = {
            "raw": ", ".join(column for column, _ in columns),
            "keys": ", ".join(f"if(overflow, '', {column}) AS {name}" for column, name in columns),
            "group": ", ".join(names),
            "conditions": conditions,
        }
        totals = self._frame(rollup_sql.RED_TOTALS.format(**fields), parameters)
        series = self._frame(rollup_sql.RED_SERIES.format(**fields), parameters)
        return RedResult(_split_quantiles(totals, "q", "", names), _split_quantiles(series, "q", "", names))

    def red_counts(self, selection: RedSelection, start_ns: int, end_ns: int, *, tenant: str | None) -> RedCounts:
        conditions, parameters = _red_conditions(selection.service, selection.operation, selection.span_kind)
        parameters |= {"start_ns": start_ns, "end_ns": end_ns} | tenant_parameters(tenant)
        rows = self._ch.query_rows(rollup_sql.RED_COUNTS.format(conditions=conditions), parameters)
        calls, errors, buckets = rows[0] if rows else (0, 0, {})
        return RedCounts(
            calls=int(calls or 0),
            errors=int(errors or 0),
            buckets={
                (float("inf") if int(bound) == rollup_sql.INF_BUCKET else float(bound)): int(count)
                for bound, count in (buckets or {}).items()
            },
        )

    def rollup_services(self, start_ns: int, end_ns: int, *, tenant: str | None) -> list[str]:
        parameters = {"start_ns": start_ns, "end_ns": end_ns} | tenant_parameters(tenant)
        sql = rollup_sql.RED_SERVICES.format(conditions=TENANT_CONDITION)
        return [row[0] for row in self._ch.query_rows(sql, parameters)]

    def rollup_time_range(self, *, tenant: str | None) -> tuple[int, int] | None:
        sql = rollup_sql.RED_TIME_RANGE.format(conditions=TENANT_CONDITION)
        rows = self._ch.query_rows(sql, tenant_parameters(tenant))
        if not rows or not rows[0][2]:
            return None
        return int(rows[0][0]), int(rows[0][1])

    def service_graph(
        self,
        start_ns: int,
        end_ns: int,
        *,
        tenant: str | None,
        scope: EdgeScope | None = None,
        limit: int | None = None,
    ) -> pl.DataFrame:
        scope = scope or EdgeScope()
        parameters = {"start_ns": start_ns, "end_ns": end_ns, "limit": _limit(limit)}
        parameters |= tenant_parameters(tenant) | scope.parameters()
        template = rollup_sql.SERVICE_GRAPH_EDGES_SCOPED if scope.parameters() else rollup_sql.SERVICE_GRAPH_EDGES
        conditions = " AND ".join([TENANT_CONDITION, *scope.conditions()])
        frame = self._frame(template.format(conditions=conditions), parameters)
        keys = ["client", "server", "connection_type"]
        return _split_quantiles(_split_quantiles(frame, "client_q", "client_", keys), "server_q", "server_", keys)

    def edge_examples(
        self,
        client: str,
        server: str,
        start_ns: int,
        end_ns: int,
        *,
        tenant: str | None,
        limit: int = 10,
        scope: EdgeScope | None = None,
    ) -> pl.DataFrame:
        scope = scope or EdgeScope()
        parameters = (
            {
                "client": client,
                "server": server,
                "start_ns": start_ns,
                "end_ns": end_ns,
                "limit": max(1, min(limit, 1000)),
            }
            | tenant_parameters(tenant)
            | scope.parameters()
        )
        conditions = " AND ".join([TENANT_CONDITION, *scope.conditions()])
        frame = self._frame(rollup_sql.EDGE_EXAMPLES.format(conditions=conditions), parameters)
        if frame.height == 0:
            return pl.DataFrame(schema=_EXAMPLE_SCHEMA)
        return frame.with_columns(pl.col("failed").cast(pl.Boolean)).cast(_EXAMPLE_SCHEMA)  # type: ignore[arg-type]

    def stage_counts(
        self, service: str, stage: str, threshold_ns: int, start_ns: int, end_ns: int, *, tenant: str | None
    ) -> tuple[int, int]:
        parameters = {
            "service": service,
            "stage": stage,
            "threshold_ns": threshold_ns,
            "start_ns": start_ns,
            "end_ns": end_ns,
        } | tenant_parameters(tenant)
        rows = self._ch.query_rows(rollup_sql.STAGE_COUNTS.format(conditions=TENANT_CONDITION), parameters)
        return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)

    def hotspot_counts(self, trace_ids: list[str], *, tenant: str | None) -> list[tuple[str, str, int]]:
        if not trace_ids:
            return []
        parameters = {"trace_ids": trace_ids} | tenant_parameters(tenant)
        rows = self._ch.query_rows(rollup_sql.HOTSPOT_COUNTS.format(conditions=TENANT_CONDITION), parameters)
        return [(row[0], row[1], int(row[2])) for row in rows]

    def _frame(self, sql: str, parameters: dict[str, object]) -> pl.DataFrame:
        frame = pl.from_arrow(self._ch.query_arrow(sql, parameters))
        assert isinstance(frame, pl.DataFrame)
        return frame


_EXAMPLE_SCHEMA = {
    "trace_id": pl.String,
    "start_time_unix_nano": pl.Int64,
    "client_operation": pl.String,
    "server_operation": pl.String,
    "client_duration_ns": pl.Int64,
    "server_duration_ns": pl.Int64,
    "failed": pl.Boolean,
}


def _red_conditions(service: str | None, operation: str | None, span_kind: str | None) -> tuple[str, dict[str, object]]:
    """The WHERE fragment (tenant first) and parameters of optional RED filters."""
    values = {"service": service, "operation": operation, "span_kind": span_kind}
    chosen = {name: value for name, value in values.items() if value is not None}
    conditions = [TENANT_CONDITION, *(rollup_sql.RED_FILTERS[name] for name in chosen)]
    return " AND ".join(conditions), dict(chosen)


def _limit(limit: int | None) -> int:
    """The bound ``limit`` of a read: ``limit`` groups (at least 0), or :data:`ALL_GROUPS` for ``None``."""
    return ALL_GROUPS if limit is None else max(limit, 0)


def _split_quantiles(frame: pl.DataFrame, column: str, prefix: str, keys: list[str]) -> pl.DataFrame:
    """Replace list column ``column`` ([p50, p95, p99], NaN when unknown) by ``<prefix>p50_ns``... (null when
    unknown), make ``overflow`` Boolean and sort by it, then ``keys``; an empty result gets the same columns."""
    names = [f"{prefix}{name}" for name in QUANTILE_COLUMNS]
    frame = frame.with_columns(pl.col("overflow").cast(pl.Boolean))
    if frame.height == 0:
        return frame.drop(column).with_columns(pl.lit(None, dtype=pl.Float64).alias(name) for name in names)
    quantiles = [pl.col(column).list.get(i).cast(pl.Float64).fill_nan(None).alias(name) for i, name in enumerate(names)]
    return frame.with_columns(quantiles).drop(column).sort(["overflow", *keys])
