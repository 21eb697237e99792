"""Reading traces: the interface the REST API and the UI depend on, and its ClickHouse implementation.

Every read takes a keyword-only ``tenant`` (``storage.tenancy``): a tenant name reads that tenant's spans
only; ``None`` reads every tenant and is for admin tokens only. It has no default on purpose: a read that
forgets it fails loudly instead of crossing tenants.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import polars as pl

from storage import analysis_sql, dependency_rollup, trace_sql
from storage.clickhouse import ClickHouse
from storage.rollup_reader import ClickHouseRollupReader
from storage.tenancy import tenant_condition, tenant_parameters
from storage.traceql import SpansetQuery
from storage.traceql_sql import span_condition

MAX_TRACE_SPANS = 100_000
"""The largest trace read whole, by default (``HOTSPAN_MAX_TRACE_SPANS``): the by-ID APIs page beyond it
(``api.trace_limits``), a trace view reads its first that many spans (``query.trace_view_cache``) and the trace pipeline
does not analyse a larger trace (``processors.pipeline.config``); the largest trace Jaeger's UI and Grafana still
draw. Written here once, the floor every one of those readers stands on."""
MAX_SEARCH_SPANS = MAX_TRACE_SPANS
"""Most spans one trace search returns whole, all its traces together, by default (``HOTSPAN_MAX_SEARCH_SPANS``,
:meth:`TraceReader.search_spans`): an answer Jaeger's UI draws whole, as it draws one trace of
:data:`MAX_TRACE_SPANS`."""

SearchOrder = Literal[
    "newest", "oldest", "longest", "shortest", "most_errors", "most_spans", "most_tokens", "longest_stage"
]
"""Orders of :meth:`TraceReader.ranked_search` (:data:`storage.trace_sql.SEARCH_ORDERS`)."""

SEARCH_COLUMNS = (
    "trace_id",
    "root_service",
    "root_name",
    "start_time_unix_nano",
    "duration_ns",
    "span_count",
    "service_count",
    "error_count",
    "hotspot_count",
)


@dataclass(frozen=True)
class TraceCursor:
    """Where a page of a trace ends (:meth:`TraceReader.trace_page`): the last span's start (ns since the epoch), span
    ID, kind as stored, name and owner tenant. :meth:`token` and :meth:`from_token` carry it through an API as an
    opaque string."""

    start_ns: int
    span_id: str
    kind: str
    name: str
    owner: str

    def token(self) -> str:
        """The cursor as URL-safe text."""
        return base64.urlsafe_b64encode(json.dumps(dataclasses.astuple(self)).encode()).decode().rstrip("=")

    @classmethod
    def from_token(cls, token: str) -> TraceCursor:
        """The cursor :meth:`token` wrote.

        Raises:
            ValueError: ``token`` is not one.
        """
        try:
            start_ns, span_id, kind, name, owner = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        except (ValueError, TypeError) as exc:
            raise ValueError("not a page token of this trace read") from exc
        if not (isinstance(start_ns, int) and all(isinstance(v, str) for v in (span_id, kind, name, owner))):
            raise ValueError("not a page token of this trace read")
        return cls(start_ns, span_id, kind, name, owner)


@dataclass(frozen=True)
class TracePage:
    """A page of a trace: ``spans`` (the columns of :meth:`TraceReader.trace`) and the cursor of the next page, None
    on the last."""

    spans: pl.DataFrame
    next: TraceCursor | None


def _after_parameters(after: TraceCursor | None) -> dict[str, object]:
    """The bound parameters of :data:`storage.trace_sql.AFTER` for ``after`` (None: from the start)."""
    if after is None:
        return {"first": True, "after_ns": 0, "after_span": "", "after_kind": "", "after_name": "", "after_owner": ""}
    return {
        "first": False,
        "after_ns": after.start_ns,
        "after_span": after.span_id,
        "after_kind": after.kind,
        "after_name": after.name,
        "after_owner": after.owner,
    }


MAX_ATTRIBUTE_FILTERS = 64
"""Most attribute filters one search may carry: each adds a condition to the SQL, and a few thousand make a statement
larger than ClickHouse parses (``max_query_size``); the APIs answer 400 beyond it."""


@dataclass(frozen=True)
class TraceQuery:
    """Filters of a trace search. A trace matches when one of its spans meets every set filter
    (Jaeger's rule: duration bounds apply to that span, not to the whole trace).

    Attributes:
        service, operation: exact service and span name.
        start_ns, end_ns: window on span start, ns since the Unix epoch; ``None`` leaves it open.
        min_duration_ns, max_duration_ns: span duration bounds in ns.
        attributes: ``(key, value)`` pairs, each matched against span or resource attributes.
        status_code: span status as stored, ``Unset``/``Ok``/``Error`` (older spellings folded).
        span_kind: span kind as stored, ``Server``/``Client``/``Producer``/``Consumer``/``Internal``/``Unspecified``.
        hotspot: ``True`` keeps traces with a span flagged ``hotspan.hotspot=true`` by the SDK processor.
        span_filter: a TraceQL query (:mod:`storage.traceql`) the span must also meet (a span it returns).
        limit: most traces returned, newest first.
    """

    service: str | None = None
    operation: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    min_duration_ns: int | None = None
    max_duration_ns: int | None = None
    attributes: Sequence[tuple[str, str]] = field(default_factory=tuple)
    status_code: str | None = None
    span_kind: str | None = None
    hotspot: bool | None = None
    span_filter: SpansetQuery | None = None
    limit: int = 20


class TraceReader(Protocol):
    """Read side of the trace store. Every method is thread-safe and returns empty results, never
    ``None``, when nothing matches. ``tenant``: the tenant whose spans are read, ``None`` for every tenant
    (admin only); spans of other tenants are invisible, even under the same trace ID.

    Raises (every method): ValueError for a ``tenant`` that is not a valid tenant name.
    """

    def services(self, *, tenant: str | None) -> list[str]:
        """Service names, sorted."""
        ...

    def operations(self, service: str, *, tenant: str | None) -> list[tuple[str, str]]:
        """``(span name, span kind)`` pairs seen for ``service``, sorted; kinds as ``Server``, ``Client``..."""
        ...

    def search(self, query: TraceQuery, *, tenant: str | None) -> pl.DataFrame:
        """Summaries of matching traces, newest first, with :data:`SEARCH_COLUMNS` (times in ns)."""
        ...

    def ranked_search(
        self,
        query: TraceQuery,
        order: SearchOrder,
        *,
        tenant: str | None,
        min_trace_duration_ns: int | None = None,
        max_trace_duration_ns: int | None = None,
        stage: str = "",
    ) -> pl.DataFrame:
        """The :meth:`search` summaries of the first ``query.limit`` traces by ``order``
        (:data:`storage.trace_sql.SEARCH_ORDERS`) among *every* trace that matches ``query`` and whose whole
        duration (first span start to last span end, ns) lies within the bounds (None leaves one open); ranked in
        the store, in no order here. ``most_tokens`` ranks by the trace pipeline's token counts (0 until analysed);
        ``longest_stage`` by the critical-path time of ``stage`` (an ``analysis.STAGES`` name), among the analysed
        traces that spent time in it only.

        Raises:
            ValueError: an unknown ``order``, or ``longest_stage`` without a ``stage``.
        """
        ...

    def trace(self, trace_id: str, *, tenant: str | None) -> pl.DataFrame:
        """Every span of one trace (lowercase 32-hex ID), each once, ordered by start, then span ID; zero rows when
        unknown. Reads the whole trace: :meth:`trace_page` for one of any size.

        Columns: trace_id, span_id, parent_span_id, name, service_name, kind, start_time_unix_nano,
        end_time_unix_nano, duration_ns, status_code (``Unset``/``Ok``/``Error``), status_message,
        trace_state, scope_name, scope_version, attributes and resource_attributes (polars
        ``Map(String, String)``: a dict per row, values as stored strings), event_times_unix_nano, event_names,
        event_attributes, link_trace_ids, link_span_ids, link_trace_states, link_attributes.
        """
        ...

    def trace_page(
        self, trace_id: str, *, tenant: str | None, after: TraceCursor | None = None, limit: int
    ) -> TracePage:
        """The first ``limit`` spans of :meth:`trace`'s order after ``after`` (from the start when None), with the
        cursor of the next page. Costs memory for ``limit`` spans, whatever the trace's size; a page of a span
        stored in many copies may hold fewer than ``limit`` spans."""
        ...

    def trace_size(self, trace_id: str, *, tenant: str | None) -> int:
        """How many spans :meth:`trace` returns for ``trace_id``; 0 when unknown."""
        ...

    def matched_spans(
        self,
        trace_ids: Sequence[str],
        query: TraceQuery,
        *,
        tenant: str | None,
        per_trace: int,
        keys: Sequence[str] = (),
    ) -> pl.DataFrame:
        """Of ``trace_ids``, the spans meeting ``query``'s span filters (each once), the first ``per_trace`` by start
        per trace. Columns: trace_id, span_id, name, start_time_unix_nano, duration_ns (ns), matched (the trace's
        count of such spans), service, status and kind (lowercase), span_attributes and resource_attributes (the
        entries, ``{key, value}`` stored strings, of the attributes named in ``keys``; empty without them)."""
        ...

    def tag_names(self, scope: str, start_ns: int, end_ns: int, *, tenant: str | None, limit: int) -> list[str]:
        """Attribute keys of ``scope`` (``span`` or ``resource``) on spans starting in ``[start_ns, end_ns]``,
        sorted, at most ``limit``.

        Raises:
            ValueError: another scope.
        """
        ...

    def tag_values(
        self, scope: str, name: str, start_ns: int, end_ns: int, *, tenant: str | None, limit: int
    ) -> list[str]:
        """Distinct values (stored strings; status and kind lowercase) of one field on spans starting in
        ``[start_ns, end_ns]``, sorted, at most ``limit``: an attribute of ``scope`` ``span`` or ``resource``
        (``resource`` ``service.name`` is the service column), or ``intrinsic`` ``name``/``status``/``kind``.

        Raises:
            ValueError: another scope or intrinsic.
        """
        ...

    def trace_sizes(self, trace_ids: Sequence[str], *, tenant: str | None) -> dict[str, int]:
        """:meth:`trace_size` of each of ``trace_ids`` in one read; unknown IDs are absent."""
        ...

    def trace_state(self, trace_id: str, *, tenant: str | None) -> tuple[int, int, int]:
        """``(spans, rows, version)``: :meth:`trace_size`, the rows stored for the trace (every copy of every
        span) and the newest data version of the parts holding them, a triple that changes with any write to the
        trace, removal from it or rewrite of it (:mod:`storage.payloads`), without reading its spans;
        ``(0, 0, 0)`` when unknown."""
        ...

    def trace_operations(self, trace_id: str, *, tenant: str | None, limit: int = 100) -> pl.DataFrame:
        """The whole trace (each span once) by operation, summed in the store without reading its spans: one row
        per (``service_name``, ``name``) with ``span_count``, ``duration_ns_sum`` and ``duration_ns_max`` (span
        durations, ns), ``error_count`` and ``first_start_ns`` (ns since the Unix epoch); the ``limit`` rows of
        most summed time, most first. Zero rows when the trace is unknown. How a trace too large to read
        whole is still shown whole."""
        ...

    def trace_ids_with_prefix(self, prefix: str, *, tenant: str | None, limit: int = 10) -> list[str]:
        """Up to ``limit`` stored trace IDs of the tenant that start with ``prefix`` (lowercase hex), sorted: how
        a short ID a page showed (its first 8 or 16 characters) is found again."""
        ...

    def search_spans(self, query: TraceQuery, *, tenant: str | None) -> pl.DataFrame:
        """Every span of the traces :meth:`search` finds for ``query`` (same traces, same limit), with the
        columns of :meth:`trace`, ordered by trace ID, then span start; zero rows when nothing matches.

        Raises:
            storage.clickhouse.ReadLimitError: ``rows``: the traces hold more spans than the reader's span budget.
        """
        ...

    def traces(self, trace_ids: Sequence[str], *, tenant: str | None) -> pl.DataFrame:
        """Every span of the traces ``trace_ids`` (lowercase 32-hex IDs), in one read: the columns of
        :meth:`trace` plus ``tenant`` (String, the owner tenant, ``''`` read as the default one), ordered by
        trace ID, then span start; unknown IDs contribute no rows. The trace pipeline reads its batches so."""
        ...

    def dependencies(self, start_ns: int, end_ns: int, *, tenant: str | None) -> list[tuple[str, str, int]]:
        """``(parent service, child service, call count)`` over parent→child span pairs whose services differ,
        for child spans starting in ``[start_ns, end_ns]`` (ns since the Unix epoch); sorted by parent, child."""
        ...


class ClickHouseTraceReader(ClickHouseRollupReader):
    """:class:`TraceReader` over ``otel_traces`` (written by Hotspan or by an OTel Collector); also the
    :class:`~storage.rollup_reader.RollupReader` over the RED and service-graph rollups of the same store."""

    def __init__(self, ch: ClickHouse, max_search_spans: int | None = None) -> None:
        """``max_search_spans``: most spans :meth:`search_spans` returns (None: no bound); more is
        :class:`~storage.clickhouse.ReadLimitError` ``rows``, raised by ClickHouse as the rows stream, before they
        are all read."""
        self._ch = ch
        self._search_settings = (
            {"max_result_rows": max_search_spans, "result_overflow_mode": "throw"} if max_search_spans else None
        )

    def services(self, *, tenant: str | None) -> list[str]:
        return [row[0] for row in self._ch.query_rows(trace_sql.SERVICES, tenant_parameters(tenant))]

    def operations(self, service: str, *, tenant: str | None) -> list[tuple[str, str]]:
        parameters = {"service": service, **tenant_parameters(tenant)}
        return [(row[0], row[1]) for row in self._ch.query_rows(trace_sql.OPERATIONS, parameters)]

    def search(self, query: TraceQuery, *, tenant: str | None) -> pl.DataFrame:
        sql, parameters = build_search(query)
        return self._summaries(sql, parameters, tenant)

    def ranked_search(
        self,
        query: TraceQuery,
        order: SearchOrder,
        *,
        tenant: str | None,
        min_trace_duration_ns: int | None = None,
        max_trace_duration_ns: int | None = None,
        stage: str = "",
    ) -> pl.DataFrame:
        if order not in trace_sql.SEARCH_ORDERS:
            raise ValueError(f"unknown order {order!r}: one of {', '.join(trace_sql.SEARCH_ORDERS)}")
        if order == "longest_stage" and not stage:
            raise ValueError("the longest_stage order needs a stage")
        joins = {"most_tokens": trace_sql.SEARCH_USAGE, "longest_stage": trace_sql.SEARCH_STAGE}
        usage = joins[order].format(summary_tenant=tenant_condition()) if order in joins else ""
        sql, parameters = build_search(
            query, trace_sql.RANKED_SEARCH, order=trace_sql.SEARCH_ORDERS[order], usage=usage
        )
        if order == "longest_stage":
            parameters["stage"] = stage
        parameters |= {
            "min_trace_ns": min_trace_duration_ns if min_trace_duration_ns is not None else 0,
            "max_trace_ns": max_trace_duration_ns if max_trace_duration_ns is not None else 2**63 - 1,
        }
        return self._summaries(sql, parameters, tenant)

    def _summaries(self, sql: str, parameters: dict[str, object], tenant: str | None) -> pl.DataFrame:
        """The trace summaries of search ``sql`` (:data:`storage.trace_sql.SEARCH`'s columns), each trace's root the
        analysis' root: traces without a span lacking a parent ID get theirs from
        :data:`storage.trace_sql.ORPHAN_ROOTS`, a second read of those traces only."""
        frame = pl.from_arrow(self._ch.query_arrow(sql, parameters | tenant_parameters(tenant)))
        assert isinstance(frame, pl.DataFrame)
        if not frame.height:
            return _empty_search()
        rootless = frame.filter(pl.col("has_root") == 0)["trace_id"]
        if rootless.len():
            roots = pl.from_arrow(
                self._ch.query_arrow(
                    trace_sql.ORPHAN_ROOTS, {"trace_ids": rootless.to_list()} | tenant_parameters(tenant)
                )
            )
            assert isinstance(roots, pl.DataFrame)
            frame = frame.update(roots, on="trace_id")
        return frame.select(SEARCH_COLUMNS)

    def trace(self, trace_id: str, *, tenant: str | None) -> pl.DataFrame:
        parameters = {"trace_id": trace_id, **tenant_parameters(tenant)}
        frame = pl.from_arrow(self._ch.query_arrow(trace_sql.TRACE_SPANS, parameters))
        assert isinstance(frame, pl.DataFrame)
        return frame

    def trace_page(
        self, trace_id: str, *, tenant: str | None, after: TraceCursor | None = None, limit: int
    ) -> TracePage:
        limit = max(1, limit)
        parameters = {"trace_id": trace_id, **tenant_parameters(tenant), **_after_parameters(after)}
        query = trace_sql.TRACE_PAGE
        frame = pl.from_arrow(self._ch.query_arrow(query, parameters | {"limit": limit, "scan": 2 * limit}))
        assert isinstance(frame, pl.DataFrame)
        if frame.height == 0:
            return TracePage(frame.drop("stored_kind", "owner"), None)
        last = frame.row(-1, named=True)
        cursor = TraceCursor(
            last["start_time_unix_nano"], last["span_id"], last["stored_kind"], last["name"], last["owner"]
        )
        more = self._ch.query_rows(trace_sql.TRACE_HAS_MORE, parameters | _after_parameters(cursor))[0][0]
        return TracePage(frame.drop("stored_kind", "owner"), cursor if more else None)

    def trace_size(self, trace_id: str, *, tenant: str | None) -> int:
        parameters = {"trace_id": trace_id, **tenant_parameters(tenant)}
        return int(self._ch.query_rows(trace_sql.TRACE_SIZE, parameters)[0][0])

    def trace_sizes(self, trace_ids: Sequence[str], *, tenant: str | None) -> dict[str, int]:
        parameters = {"trace_ids": list(trace_ids), **tenant_parameters(tenant)}
        return {trace_id: int(count) for trace_id, count in self._ch.query_rows(trace_sql.TRACE_SIZES, parameters)}

    def trace_state(self, trace_id: str, *, tenant: str | None) -> tuple[int, int, int]:
        parameters = {"trace_id": trace_id, **tenant_parameters(tenant)}
        spans, rows, version = self._ch.query_rows(trace_sql.TRACE_STATE, parameters)[0]
        return int(spans), int(rows), int(version)

    def trace_operations(self, trace_id: str, *, tenant: str | None, limit: int = 100) -> pl.DataFrame:
        parameters = {"trace_id": trace_id, "limit": max(1, limit), **tenant_parameters(tenant)}
        frame = pl.from_arrow(self._ch.query_arrow(trace_sql.TRACE_OPERATIONS, parameters))
        assert isinstance(frame, pl.DataFrame)
        return frame

    def trace_ids_with_prefix(self, prefix: str, *, tenant: str | None, limit: int = 10) -> list[str]:
        # Another tenant's IDs with the prefix can crowd the candidates out; four times the limit keeps that rare.
        parameters = {"prefix": prefix, "scan": 4 * limit}
        candidates = [row[0] for row in self._ch.query_rows(trace_sql.TRACE_ID_PREFIX_CANDIDATES, parameters)]
        if not candidates:
            return []
        owned = self._ch.query_rows(trace_sql.OWNED_TRACE_IDS, {"trace_ids": candidates, **tenant_parameters(tenant)})
        return [row[0] for row in owned][:limit]

    def matched_spans(
        self,
        trace_ids: Sequence[str],
        query: TraceQuery,
        *,
        tenant: str | None,
        per_trace: int,
        keys: Sequence[str] = (),
    ) -> pl.DataFrame:
        sql, parameters = build_search(query, trace_sql.MATCHED_SPANS)
        parameters |= {"trace_ids": list(trace_ids), "per_trace": max(1, per_trace), "keys": list(keys)}
        frame = pl.from_arrow(self._ch.query_arrow(sql, parameters | tenant_parameters(tenant)))
        assert isinstance(frame, pl.DataFrame)
        return frame

    def tag_names(self, scope: str, start_ns: int, end_ns: int, *, tenant: str | None, limit: int) -> list[str]:
        if scope not in trace_sql.TAG_NAMES:
            raise ValueError(f"unknown tag scope {scope!r}: span or resource")
        sql = trace_sql.TAG_NAMES_OF.format(column=trace_sql.TAG_NAMES[scope], tenant=trace_sql.TENANT_FILTER)
        parameters = {"start_ns": start_ns, "end_ns": end_ns, "limit": max(1, limit), **tenant_parameters(tenant)}
        return [row[0] for row in self._ch.query_rows(sql, parameters)]

    def tag_values(
        self, scope: str, name: str, start_ns: int, end_ns: int, *, tenant: str | None, limit: int
    ) -> list[str]:
        fields = trace_sql.TAG_VALUE_FIELDS
        found = fields.get((scope, name)) or (fields.get((scope, "")) if scope != "intrinsic" else None)
        if found is None:
            raise ValueError(f"unknown tag {scope}.{name}")
        value, present = found
        sql = trace_sql.TAG_VALUES_OF.format(value=value, present=present, tenant=trace_sql.TENANT_FILTER)
        parameters = {"key": name, "start_ns": start_ns, "end_ns": end_ns, "limit": max(1, limit)}
        return [row[0] for row in self._ch.query_rows(sql, parameters | tenant_parameters(tenant))]

    def search_spans(self, query: TraceQuery, *, tenant: str | None) -> pl.DataFrame:
        sql, parameters = build_search(query, trace_sql.SEARCH_SPANS)
        frame = pl.from_arrow(self._ch.query_arrow(sql, parameters | tenant_parameters(tenant), self._search_settings))
        assert isinstance(frame, pl.DataFrame)
        return frame

    def traces(self, trace_ids: Sequence[str], *, tenant: str | None) -> pl.DataFrame:
        parameters = {"trace_ids": list(trace_ids), **tenant_parameters(tenant)}
        frame = pl.from_arrow(self._ch.query_arrow(analysis_sql.TRACES_SPANS, parameters))
        assert isinstance(frame, pl.DataFrame)
        return frame

    def dependencies(self, start_ns: int, end_ns: int, *, tenant: str | None) -> list[tuple[str, str, int]]:
        return dependency_rollup.dependencies(self._ch, start_ns, end_ns, tenant=tenant)


def build_search(query: TraceQuery, template: str = trace_sql.SEARCH, **fields: str) -> tuple[str, dict[str, object]]:
    """The search SQL and its parameters for ``query``; user values only ever travel as parameters.

    ``template`` is a query starting with :data:`storage.trace_sql.MATCHED_TRACES` (trace summaries by default,
    :data:`storage.trace_sql.SEARCH_SPANS` for whole traces) or :data:`storage.trace_sql.RANKED_TRACES`, whose
    other fields (fixed SQL fragments, never user text) come in ``fields``. The SQL carries
    :data:`storage.trace_sql.TENANT_FILTER` on every read of ``otel_traces``; the caller adds its parameters
    (:func:`storage.tenancy.tenant_parameters`), so the SQL runs for no one until it does.
    """
    parameters: dict[str, object] = {"limit": max(1, min(query.limit, 10_000))}
    conditions = []
    for name, condition in trace_sql.SEARCH_SPAN_FILTERS.items():
        value = getattr(query, name)
        if value is not None:
            conditions.append(condition)
            parameters[name] = value
    for index, (key, value) in enumerate(query.attributes):
        conditions.append(trace_sql.ATTRIBUTE_FILTER.format(i=index))
        parameters[f"attr_key_{index}"] = key
        parameters[f"attr_value_{index}"] = value
    if query.span_filter is not None:
        condition, filter_parameters = span_condition(query.span_filter)
        conditions.append(condition)
        parameters |= filter_parameters
    where = " AND ".join(conditions) or "1"
    return template.format(conditions=where, tenant=trace_sql.TENANT_FILTER, **fields), parameters


def _empty_search() -> pl.DataFrame:
    schema = {name: pl.String for name in SEARCH_COLUMNS[:3]} | {name: pl.Int64 for name in SEARCH_COLUMNS[3:]}
    return pl.DataFrame(schema=schema)
