"""The anomaly detector's storage: the per-minute series it baselines and the incidents it opens
(``hotspan_incidents``, migration 0060; SQL in :mod:`storage.incident_sql`).

Every read takes a keyword-only ``tenant`` (:mod:`storage.tenancy`): a name reads that tenant's rows, ``None``
every tenant (admin only). Times are ns since the Unix epoch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

import polars as pl
import pyarrow as pa

from storage import incident_sql, trace_sql
from storage.clickhouse import ClickHouse
from storage.tenancy import tenant_condition, tenant_parameters

SeriesKind = Literal["operation", "stage"]
"""What a series is about: a (service, operation, span kind) of the RED rollup, or a (root service, stage) of the
request summaries."""
IncidentKind = Literal["operation", "stage", "finding"]
"""What an incident's series is about: a :data:`SeriesKind`, or ``finding``: a diagnosis cause (``name``) new in the
window's findings for a root service (``service``), judged by its severity (``metric`` ``severity``)."""

IncidentStatus = Literal["open", "resolved"]

SERIES_SCHEMA = {
    "tenant": pl.String,
    "service": pl.String,
    "name": pl.String,
    "span_kind": pl.String,
    "bucket_ns": pl.Int64,
    "calls": pl.Int64,
    "errors": pl.Int64,
    "p95_ns": pl.Float64,
}
"""Columns of :meth:`IncidentStore.series`: the tenant (a read of every tenant holds them all), the series keys, the
bucket start (ns), spans or requests, the failed ones, p95 duration (ns; null without values)."""

SHAPE_SCHEMA = {
    "service": pl.String,
    "span_service": pl.String,
    "name": pl.String,
    "current": pl.Boolean,
    "spans": pl.Int64,
    "requests": pl.Int64,
    "max_bytes": pl.Float64,
}
"""Columns of one tenant's shape rows: the root service, a span's service and name, whether the row is the window's
(else the window's before it), its spans, the root service's requests in that window, the largest size attribute
among them (bytes, 0 without one)."""
TENANT_SHAPE_SCHEMA = {"tenant": pl.String, **SHAPE_SCHEMA}
"""Columns of :meth:`IncidentStore.root_shape`: the tenant (a read of every tenant holds them all), then
:data:`SHAPE_SCHEMA`'s."""

_SERIES_SQL = {"operation": incident_sql.OPERATION_SERIES, "stage": incident_sql.STAGE_SERIES}
_EXCEEDANCES_SQL = {
    "operation": incident_sql.EXCEEDANCES.format(**incident_sql.OPERATION_EXCEEDANCE_PARTS).format(
        kind=trace_sql.KIND, status=trace_sql.STATUS, conditions=trace_sql.TENANT_FILTER
    ),
    "stage": incident_sql.EXCEEDANCES.format(**incident_sql.STAGE_EXCEEDANCE_PARTS).format(
        conditions=tenant_condition()
    ),
}
_ROOT_SHAPE_SQL = incident_sql.ROOT_SHAPE.format(
    tenant=trace_sql.TENANT, span_conditions=trace_sql.TENANT_FILTER, conditions=tenant_condition()
)
_ROOT_REQUESTS_SQL = incident_sql.ROOT_REQUESTS.format(conditions=tenant_condition())
_MINUTE = {"operation": incident_sql.MINUTE_BUCKET, "stage": incident_sql.SUMMARY_MINUTE_BUCKET}


@dataclass(frozen=True)
class Incident:
    """One incident at one version (the table's row; names as :data:`storage.incident_sql.INCIDENT_COLUMNS`).

    Attributes:
        tenant: owner tenant.
        incident_id: stable ID (32 hex): the same deviation evaluated again names the same incident.
        status: ``open`` or ``resolved``.
        window_start_ns, window_end_ns: the window whose deviation opened it.
        baseline_start_ns, baseline_end_ns: the baseline window it was judged against; ``seasonal`` when that is
            the same time one day earlier, else the trailing minutes before the window.
        kind, service, name, span_kind, metric: the primary series (the largest robust score): ``operation``
            (``name`` a span name, ``span_kind`` its kind) or ``stage`` (``service`` the root service, ``name`` a
            stage, ``span_kind`` empty) or ``finding`` (``service`` the root service, ``name`` a diagnosis cause,
            ``span_kind`` empty); ``metric`` ``p95_ms``, ``error_rate``, ``throughput_per_min`` or ``severity``
            (a finding's: 0 none, 1 info, 2 warning, 3 critical).
        baseline_value, observed_value: the primary series' baseline median and observed value, in the metric's
            unit (ms, 0..1, calls per minute, severity); ``score`` its robust z-score (:mod:`analysis.baseline`), for
            a finding the severity's rise over the baseline window's (1 to 3).
        services: every service with a deviating series in the incident.
        series: every deviating series: dicts with the keys above plus ``baseline_scale``, ``calls``.
        findings: the diagnosis findings of the window (dicts: ``cause``, ``title``, ``severity``,
            ``confidence``, ``remedy``, ``new``: whether the baseline window lacked that cause at that severity).
        neighbours: services and peers connected to ``service`` in the window's service graph.
        example_trace_ids: slowest or failed traces of the primary series in the window.
        last_deviation_end_ns: end of the last window a series of it deviated in.
        resolved_at_ns: end of the window in which every series was back within its baseline; None while open.
        version: ns of the evaluation that wrote this version (newest wins).
    """

    tenant: str
    incident_id: str
    status: IncidentStatus
    window_start_ns: int
    window_end_ns: int
    baseline_start_ns: int
    baseline_end_ns: int
    seasonal: bool
    kind: IncidentKind
    service: str
    name: str
    span_kind: str
    metric: str
    baseline_value: float
    observed_value: float
    score: float
    services: list[str]
    series: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    neighbours: list[str]
    example_trace_ids: list[str]
    last_deviation_end_ns: int
    resolved_at_ns: int | None = None
    version: int = 0


@dataclass(frozen=True)
class IncidentQuery:
    """A read of incidents: all filters optional.

    Attributes:
        start_ns, end_ns: keep incidents open at some moment of ``[start_ns, end_ns]``.
        service: keep incidents where this service deviated.
        metric: the primary series' metric.
        status: ``open`` or ``resolved``.
        limit: most incidents, newest opening first.
        incident_id: one incident.
    """

    start_ns: int | None = None
    end_ns: int | None = None
    service: str | None = None
    metric: str | None = None
    status: IncidentStatus | None = None
    limit: int = 100
    incident_id: str | None = None


@dataclass(frozen=True)
class Exceedances:
    """One series counted call by call in a window and in its baseline window
    (:meth:`IncidentStore.exceedances`).

    Attributes:
        calls, over, errors: the window's calls (spans, or requests for a stage), those slower than the threshold, the
            failed ones.
        baseline_calls, baseline_over, baseline_errors: the same in the baseline window.
    """

    calls: int
    over: int
    errors: int
    baseline_calls: int
    baseline_over: int
    baseline_errors: int


@dataclass(frozen=True)
class CountedSeries:
    """What :meth:`IncidentStore.exceedances` counts: a series (:data:`SeriesKind` and its keys), a threshold
    (whole ns), the window ``[start_ns, end_ns)`` and the baseline window ``[baseline_start_ns, baseline_end_ns)``,
    which ends at or before ``start_ns``."""

    kind: SeriesKind
    service: str
    name: str
    span_kind: str
    threshold_ns: int
    start_ns: int
    end_ns: int
    baseline_start_ns: int
    baseline_end_ns: int


class IncidentStore(Protocol):
    """The detector's reads and writes. Thread-safe, blocking; empty results, never None.

    Raises (every method): ValueError for an invalid ``tenant``; what ClickHouse raises.
    """

    def series(
        self,
        kind: SeriesKind,
        start_ns: int,
        end_ns: int,
        *,
        tenant: str | None,
        whole: bool = False,
        also: tuple[int, int] | None = None,
    ) -> pl.DataFrame:
        """Series rows (:data:`SERIES_SCHEMA`) of ``kind`` over ``[start_ns, end_ns)``, and over ``also`` (a second
        ``(start_ns, end_ns)``, disjoint) when given: one per minute, or one for the whole window with ``whole``
        (then without ``also``); in no particular order."""
        ...

    def exceedances(self, series: CountedSeries, *, tenant: str | None) -> Exceedances:
        """``series`` counted call by call: calls, calls slower than its threshold and failed calls, in its window
        and in its baseline window (zeros where none)."""
        ...

    def root_shape(
        self, previous_ns: int, start_ns: int, end_ns: int, *, size_keys: Sequence[str], tenant: str | None
    ) -> pl.DataFrame:
        """What the requests of each root service are made of (:data:`TENANT_SHAPE_SCHEMA`) in ``[start_ns,
        end_ns)`` and in ``[previous_ns, start_ns)``: spans per (span's service, name) and the largest value of the
        ``size_keys`` attributes, requests placed by their start."""
        ...

    def active_tenants(self, start_ns: int, end_ns: int) -> list[str]:
        """Tenants that stored spans in ``[start_ns, end_ns)``, sorted."""
        ...

    def write(self, incidents: Sequence[Incident]) -> None:
        """Store these incident versions; writing one again is harmless (the newest version wins)."""
        ...

    def incidents(self, query: IncidentQuery, *, tenant: str | None) -> list[Incident]:
        """Incidents at their newest version matching ``query``, newest opening first."""
        ...


class ClickHouseIncidentStore:
    """:class:`IncidentStore` over ClickHouse (migration 0060 and the rollups of 0021 and 0015)."""

    def __init__(self, ch: ClickHouse) -> None:
        self._ch = ch

    def series(
        self,
        kind: SeriesKind,
        start_ns: int,
        end_ns: int,
        *,
        tenant: str | None,
        whole: bool = False,
        also: tuple[int, int] | None = None,
    ) -> pl.DataFrame:
        if whole and also is not None:
            raise ValueError("a whole-window read covers one window")
        sql = _SERIES_SQL[kind].format(
            bucket=incident_sql.WHOLE_WINDOW if whole else _MINUTE[kind],
            also=incident_sql.ALSO_SPAN if also else "",
            conditions=tenant_condition(),
        )
        parameters = {"start_ns": start_ns, "end_ns": end_ns} | tenant_parameters(tenant)
        if also:
            parameters |= {"also_start_ns": also[0], "also_end_ns": also[1]}
        frame = pl.from_arrow(self._ch.query_arrow(sql, parameters))
        assert isinstance(frame, pl.DataFrame)
        if frame.height == 0:
            return pl.DataFrame(schema=SERIES_SCHEMA)
        return frame.cast(SERIES_SCHEMA).with_columns(pl.col("p95_ns").fill_nan(None))  # type: ignore[arg-type]

    def exceedances(self, series: CountedSeries, *, tenant: str | None) -> Exceedances:
        parameters = asdict(series) | tenant_parameters(tenant)
        del parameters["kind"]
        if series.kind == "stage":
            del parameters["span_kind"]
        (row,) = self._ch.query_rows(_EXCEEDANCES_SQL[series.kind], parameters)
        return Exceedances(*(int(value) for value in row))

    def root_shape(
        self, previous_ns: int, start_ns: int, end_ns: int, *, size_keys: Sequence[str], tenant: str | None
    ) -> pl.DataFrame:
        parameters = {"previous_ns": previous_ns, "start_ns": start_ns, "end_ns": end_ns} | tenant_parameters(tenant)
        shape = pl.from_arrow(self._ch.query_arrow(_ROOT_SHAPE_SQL, parameters | {"size_keys": list(size_keys)}))
        assert isinstance(shape, pl.DataFrame)
        if shape.height == 0:
            return pl.DataFrame(schema=TENANT_SHAPE_SCHEMA)
        requests = pl.from_arrow(self._ch.query_arrow(_ROOT_REQUESTS_SQL, parameters))
        assert isinstance(requests, pl.DataFrame)
        joined = shape.cast({"current": pl.Boolean}).join(
            requests.cast({"current": pl.Boolean}), on=["tenant", "service", "current"], how="inner"
        )
        return joined.select(list(TENANT_SHAPE_SCHEMA)).cast(TENANT_SHAPE_SCHEMA)  # type: ignore[arg-type]

    def active_tenants(self, start_ns: int, end_ns: int) -> list[str]:
        rows = self._ch.query_rows(incident_sql.ACTIVE_TENANTS, {"start_ns": start_ns, "end_ns": end_ns})
        return [row[0] for row in rows]

    def write(self, incidents: Sequence[Incident]) -> None:
        if incidents:
            self._ch.insert_arrow("hotspan_incidents", _to_arrow(incidents))

    def incidents(self, query: IncidentQuery, *, tenant: str | None) -> list[Incident]:
        values = {
            "incident_id": query.incident_id,
            "service": query.service,
            "metric": query.metric,
            "end_ns": query.end_ns,
            "status": query.status,
            "start_ns": query.start_ns,
        }
        chosen = {name: value for name, value in values.items() if value is not None}
        conditions = [tenant_condition()] + [
            incident_sql.INCIDENT_FILTERS[n] for n in chosen if n in incident_sql.INCIDENT_FILTERS
        ]
        latest = [incident_sql.LATEST_FILTERS[n] for n in chosen if n in incident_sql.LATEST_FILTERS] or ["1"]
        sql = incident_sql.INCIDENTS.format(conditions=" AND ".join(conditions), latest=" AND ".join(latest))
        parameters = chosen | {"limit": max(1, min(query.limit, 10_000))} | tenant_parameters(tenant)
        rows = self._ch.query_arrow(sql, parameters).to_pylist()
        return [_incident(row) for row in rows]


_COLUMNS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("tenant", "Tenant", pa.string()),
    ("incident_id", "IncidentId", pa.string()),
    ("status", "Status", pa.string()),
    ("window_start_ns", "Timestamp", pa.timestamp("ns")),
    ("window_end_ns", "WindowEnd", pa.timestamp("ns")),
    ("baseline_start_ns", "BaselineStart", pa.timestamp("ns")),
    ("baseline_end_ns", "BaselineEnd", pa.timestamp("ns")),
    ("seasonal", "Seasonal", pa.bool_()),
    ("kind", "Kind", pa.string()),
    ("service", "ServiceName", pa.string()),
    ("name", "Name", pa.string()),
    ("span_kind", "SpanKind", pa.string()),
    ("metric", "Metric", pa.string()),
    ("baseline_value", "BaselineValue", pa.float64()),
    ("observed_value", "ObservedValue", pa.float64()),
    ("score", "Score", pa.float64()),
    ("services", "Services", pa.list_(pa.string())),
    ("series", "Series", pa.string()),
    ("findings", "Findings", pa.string()),
    ("neighbours", "Neighbours", pa.list_(pa.string())),
    ("example_trace_ids", "ExampleTraceIds", pa.list_(pa.string())),
    ("last_deviation_end_ns", "LastDeviationEnd", pa.timestamp("ns")),
    ("resolved_at_ns", "ResolvedAt", pa.timestamp("ns")),
    ("version", "Version", pa.uint64()),
)
"""(:class:`Incident` field, table column, Arrow type) in the table's order, as
:meth:`ClickHouseIncidentStore.write` inserts them."""
_JSON_FIELDS = ("series", "findings")
"""Fields stored as JSON text."""


def _to_arrow(incidents: Sequence[Incident]) -> pa.Table:
    rows = [asdict(item) for item in incidents]
    schema = pa.schema([(column, kind) for _, column, kind in _COLUMNS])
    data = {
        column: [json.dumps(row[name], sort_keys=True) if name in _JSON_FIELDS else row[name] for row in rows]
        for name, column, _ in _COLUMNS
    }
    return pa.table(data, schema=schema)


def _incident(row: dict[str, Any]) -> Incident:
    values = {name: row[name] for name, _, _ in _COLUMNS}
    for name in _JSON_FIELDS:
        values[name] = json.loads(values[name] or "[]")
    return Incident(**values)
