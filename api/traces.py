"""``/api/v1`` routes for services, operations and traces. Thin: parse, call the query room
(:class:`query.service.QueryService`), shape the answer.

Every read is limited to the caller's tenant (:func:`api.tenancy.read_tenant`, from the bearer token).
"""

from __future__ import annotations

from typing import Annotated, Any

import polars as pl
from fastapi import APIRouter, Depends, Path, Query, Response

from api.errors import ApiError
from api.models import (
    AgentEdge,
    ErrorResponse,
    Event,
    Link,
    Operation,
    OperationsResponse,
    ServicesResponse,
    SpanOut,
    TraceResponse,
    TracesResponse,
    TraceSummary,
    WindowAgentGraphResponse,
)
from api.read_pool import READ_ERRORS, ReadPool
from api.tenancy import Tenant
from api.trace_limits import TraceReadLimits
from api.window import MAX_NS, check_order
from query.service import QueryService
from query.store import MAX_ATTRIBUTE_FILTERS, IdError, TraceCursor, TraceQuery, normalize_trace_id
from query.trace_search import Sort, TraceSearch
from units import NS_PER_MS

MAX_DURATION_MS = MAX_NS // NS_PER_MS
"""Longest duration bound, ms: the largest span duration a ``DateTime64(9)`` range holds (~292 years); it also
keeps ``inf`` (and ``1e309``) out of the ns conversion."""


def build_router(
    query: QueryService, limits: TraceReadLimits | None = None, reads: ReadPool | None = None
) -> APIRouter:
    """Routes over the query room ``query`` (the same methods the UI reads through; its analysis for the model usage
    of search results); every query is parameterised by the storage layer. A trace read returns at most
    ``limits.max_spans`` spans per page (:mod:`api.trace_limits`). Every read, and the answer built from it, runs on
    ``reads`` (:mod:`api.read_pool`; a pool of its own when omitted), never on the event loop."""
    router = APIRouter(prefix="/api/v1", tags=["traces"], responses=READ_ERRORS)
    limits = limits or TraceReadLimits()
    reads = reads or ReadPool()

    @router.get("/services", operation_id="list_services", response_model=ServicesResponse)
    async def services(tenant: Tenant) -> ServicesResponse:
        """Every service that has sent spans."""
        return ServicesResponse(services=await reads.run(query.services, tenant=tenant))

    @router.get("/services/{service}/operations", operation_id="list_operations", response_model=OperationsResponse)
    async def operations(service: str, tenant: Tenant) -> OperationsResponse:
        """Span names of one service with their span kinds; empty for an unknown service."""
        pairs = await reads.run(query.operations, service, tenant=tenant)
        return OperationsResponse(operations=[Operation(name=n, span_kind=k) for n, k in pairs])

    @router.get(
        "/traces",
        operation_id="search_traces",
        response_model=TracesResponse,
        responses={400: {"model": ErrorResponse}},
    )
    async def search(
        tenant: Tenant,
        service: str | None = None,
        operation: str | None = None,
        start_ns: Annotated[int | None, Query(ge=0, le=MAX_NS, description="Window start, ns since epoch.")] = None,
        end_ns: Annotated[int | None, Query(ge=0, le=MAX_NS, description="Window end, ns since epoch.")] = None,
        min_duration_ms: Annotated[
            float | None, Query(ge=0, le=MAX_DURATION_MS, description="Span duration lower bound, ms.")
        ] = None,
        max_duration_ms: Annotated[
            float | None, Query(ge=0, le=MAX_DURATION_MS, description="Span duration upper bound, ms.")
        ] = None,
        attr: Annotated[
            list[str] | None,
            Query(
                description=f"`key:value`, repeatable (at most {MAX_ATTRIBUTE_FILTERS}); span or resource attribute."
            ),
        ] = None,
        hotspot: Annotated[
            bool | None, Query(description="`true`: only traces with a span flagged `hotspan.hotspot=true`.")
        ] = None,
        min_trace_duration_ms: Annotated[
            float | None,
            Query(
                ge=0, le=MAX_DURATION_MS, description="Whole-trace duration lower bound (first start to last end), ms."
            ),
        ] = None,
        max_trace_duration_ms: Annotated[
            float | None, Query(ge=0, le=MAX_DURATION_MS, description="Whole-trace duration upper bound, ms.")
        ] = None,
        sort: Annotated[
            Sort,
            Query(description="Order, ranked over every matching trace of the window (not only the newest found)."),
        ] = "newest",
        stage: Annotated[
            str | None, Query(description="The stage the `longest_stage` sort ranks by (e.g. `llm.decode`).")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 20,
    ) -> Response:
        """Traces with a span matching every filter (Jaeger's matching rule) and a whole duration within the trace
        bounds, in the asked order, with the model usage of those the trace pipeline has analysed: model calls,
        tokens, cost and dominant stage. The same search as the UI's Search page and the MCP ``search_traces``
        tool (:meth:`query.service.QueryService.search`)."""
        check_order(start_ns, end_ns)
        if len(attr or ()) > MAX_ATTRIBUTE_FILTERS:
            raise ApiError(
                400, "invalid_parameter", f"attr: {len(attr or ())} filters (at most {MAX_ATTRIBUTE_FILTERS})"
            )
        filters = TraceQuery(
            service=service or None,
            operation=operation or None,
            start_ns=start_ns,
            end_ns=end_ns,
            min_duration_ns=_ns(min_duration_ms),
            max_duration_ns=_ns(max_duration_ms),
            attributes=tuple(parse_attribute_filter(a) for a in attr or ()),
            hotspot=hotspot,
        )
        search = TraceSearch(
            filters,
            min_trace_duration_ns=_ns(min_trace_duration_ms),
            max_trace_duration_ns=_ns(max_trace_duration_ms),
            sort=sort,
            limit=limit,
            stage=stage or "",
        )

        def answer() -> TracesResponse:
            try:
                rows = query.search(search, tenant=tenant).traces
            except ValueError as exc:
                raise ApiError(400, "invalid_parameter", str(exc)) from None
            return TracesResponse(traces=[TraceSummary(**row) for row in rows.iter_rows(named=True)])

        return await reads.json(answer)

    @router.get(
        "/agent-graph",
        operation_id="window_agent_graph",
        response_model=WindowAgentGraphResponse,
        responses={400: {"model": ErrorResponse}},
    )
    async def window_agent_graph(
        tenant: Tenant,
        service: Annotated[str | None, Query(description="Traces with a span of this service.")] = None,
        operation: Annotated[str | None, Query(description="Traces with a span of this name.")] = None,
        start_ns: Annotated[int | None, Query(ge=0, le=MAX_NS, description="Window start, ns since epoch.")] = None,
        end_ns: Annotated[int | None, Query(ge=0, le=MAX_NS, description="Window end, ns since epoch.")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_AGENT_GRAPH_TRACES, description="Newest traces summed.")] = 100,
    ) -> Response:
        """The agent graph (as ``/traces/{trace_id}/agent-graph``) summed over the newest ``limit`` traces of the
        window: per edge its calls, the traces it occurs in, summed time and time on each request's critical
        path (:mod:`query.agents`)."""
        check_order(start_ns, end_ns)
        filters = TraceQuery(
            service=service or None, operation=operation or None, start_ns=start_ns, end_ns=end_ns, limit=limit
        )

        def answer() -> WindowAgentGraphResponse:
            graph = query.agent_graph(filters, tenant=tenant)
            edges = [AgentEdge(**row) for row in graph.edges.iter_rows(named=True)]
            return WindowAgentGraphResponse(traces=graph.traces, edges=edges)

        return await reads.json(answer)

    @router.get(
        "/traces/{trace_id}",
        operation_id="get_trace",
        response_model=TraceResponse,
        responses={400: {"model": ErrorResponse}, 404: {"model": ErrorResponse}},
    )
    async def get_trace(
        trace_id: TraceId,
        tenant: Tenant,
        page_token: Annotated[
            str | None, Query(description="`next_page_token` of the previous page; absent for the first.")
        ] = None,
        limit: Annotated[
            int | None,
            Query(ge=1, le=2**31 - 1, description="Most spans to return; default and cap HOTSPAN_MAX_TRACE_SPANS."),
        ] = None,
    ) -> Response:
        """The spans of one trace, each once, by start time, in pages of at most ``HOTSPAN_MAX_TRACE_SPANS``: a trace
        that fits is answered whole (``truncated`` false); a larger one page by page, each answer giving the
        ``next_page_token``. Each page costs memory for its own spans only. IDs: 32 hex (any case), 16 hex (64-bit,
        zero-padded) or base64."""
        size = min(limit or limits.max_spans, limits.max_spans)
        try:
            after = TraceCursor.from_token(page_token) if page_token else None
        except ValueError as exc:
            raise ApiError(400, "invalid_parameter", f"page_token: {exc}") from exc

        def page() -> TraceResponse:
            found = query.trace_page(trace_id, tenant=tenant, after=after, limit=size)
            if found.span_count == 0:
                raise ApiError(404, "not_found", f"trace {trace_id} not found")
            if found.partial:
                limits.count_truncated("v1")
            return TraceResponse(
                trace_id=trace_id,
                spans=spans_out(found.spans),
                span_count=found.span_count,
                next_page_token=found.next.token() if found.next else None,
                truncated=found.partial,
            )

        return await reads.json(page)

    return router


MAX_AGENT_GRAPH_TRACES = 1_000
"""Most traces one window agent graph sums (their spans are read and analysed at once, within the span budget)."""


def parse_trace_id(text: str) -> str:
    """Canonical trace ID from a path or query value. Raises ApiError 400 naming the field."""
    try:
        return normalize_trace_id(text)
    except IdError as exc:
        raise ApiError(400, "invalid_trace_id", f"trace_id: {exc}") from exc


def _path_trace_id(
    trace_id: Annotated[str, Path(description="32 hex characters (any case), 16 (64-bit, zero-padded) or base64.")],
) -> str:
    return parse_trace_id(trace_id)


TraceId = Annotated[str, Depends(_path_trace_id)]
"""A route's ``{trace_id}``, canonical: a malformed one is answered 400 as the request is read, before the route
waits for a read thread (:meth:`api.read_pool.ReadPool.endpoint` runs the route's body there)."""


def parse_attribute_filter(text: str) -> tuple[str, str]:
    """``key:value`` → ``(key, value)``; the value may contain colons. Raises ApiError 400."""
    key, sep, value = text.partition(":")
    if not sep or not key:
        raise ApiError(400, "invalid_parameter", f"attr: expected key:value, got {text!r}")
    return key, value


def spans_out(frame: pl.DataFrame) -> list[SpanOut]:
    """Rows of :meth:`TraceReader.trace` as API spans (maps to dicts, nested events and links)."""
    return [_span(row) for row in frame.iter_rows(named=True)]


def _span(row: dict[str, Any]) -> SpanOut:
    events = [
        Event(time_unix_nano=t, name=n, attributes=_as_dict(a))
        for t, n, a in zip(row["event_times_unix_nano"], row["event_names"], row["event_attributes"], strict=True)
    ]
    links = [
        Link(trace_id=t, span_id=s, trace_state=st, attributes=_as_dict(a))
        for t, s, st, a in zip(
            row["link_trace_ids"],
            row["link_span_ids"],
            row["link_trace_states"],
            row["link_attributes"],
            strict=True,
        )
    ]
    scalar = {k: v for k, v in row.items() if not k.startswith(("event_", "link_"))}
    scalar["attributes"] = _as_dict(row["attributes"])
    scalar["resource_attributes"] = _as_dict(row["resource_attributes"])
    return SpanOut(**scalar, events=events, links=links)


def _as_dict(value: Any) -> dict[str, str]:
    """A map cell as polars returns it (dict, or list of key/value structs) → dict."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    return {item["key"]: item["value"] for item in value}


def _ns(ms: float | None) -> int | None:
    """A duration bound in ms as ns; None stays open."""
    return None if ms is None else int(ms * NS_PER_MS)
