"""Jaeger query API v1 (``/api/...``), the HTTP JSON API Jaeger UI and Grafana's Jaeger data source call.

Thin: parse (:mod:`api.jaeger.params`), call the query room (:class:`query.service.QueryService`), shape Jaeger
JSON (:mod:`api.jaeger.model`). Every answer is Jaeger's envelope ``{data, total, limit, offset, errors}``; failures
too (:mod:`api.jaeger.errors`).
Times: ``start``/``end`` in **µs**, ``endTs``/``lookback`` of dependencies in **ms**, span durations as Go
duration strings; span times in the answers are µs.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from api.jaeger import model, params
from api.jaeger.errors import JaegerError, JaegerV1Route
from api.jaeger.model import JaegerDependency, JaegerEnvelope, JaegerOperation, JaegerStructuredError, JaegerTrace
from api.jaeger.paths import ANY_PATH
from api.read_pool import ReadPool, spliced
from api.tenancy import Tenant
from api.trace_limits import TraceReadLimits
from api.traces import parse_trace_id
from query.service import BoundedTrace, QueryService

MAX_TRACE_IDS = 1_000
"""Most ``traceID`` values one search may ask for (read together, :func:`query.bounded_trace.read_bounded_traces`)."""

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": JaegerEnvelope[None], "description": "Bad parameter: `data` null, the reason in `errors`."},
    413: {
        "model": JaegerEnvelope[None],
        "description": "The read would exceed its budget (spans of a search, memory): narrow it (`api.read_pool`).",
    },
    503: {
        "model": JaegerEnvelope[None],
        "description": "Too many reads at once, or one ran past its time budget; retry after `Retry-After` s.",
    },
}


def build_router(
    query: QueryService, limits: TraceReadLimits | None = None, reads: ReadPool | None = None
) -> APIRouter:
    """Jaeger API v1 routes over the query room ``query``; a trace looked up by ID holds at most ``limits.max_spans``
    spans (the first by start, with a trace warning saying so: :mod:`api.trace_limits`). Every read, and the answer
    built from it, runs on ``reads`` (:mod:`api.read_pool`; a pool of its own when omitted), never on the event
    loop."""
    router = APIRouter(prefix="/api", tags=["jaeger"], route_class=JaegerV1Route)
    limits = limits or TraceReadLimits()
    reads = reads or ReadPool()

    @router.get(
        "/services",
        operation_id="jaeger_v1_services",
        response_model=JaegerEnvelope[list[str]],
        description="Service names, sorted.",
    )
    async def services(tenant: Tenant) -> JaegerEnvelope[list[str]]:
        names = await reads.run(query.services, tenant=tenant)
        return JaegerEnvelope[list[str]](data=names, total=len(names))

    @router.get(
        f"/services/{{service:{ANY_PATH}}}/operations",
        operation_id="jaeger_v1_service_operations",
        response_model=JaegerEnvelope[list[str]],
        description="Span names of one service, any kind, sorted; empty for an unknown service.",
    )
    async def service_operations(service: str, tenant: Tenant) -> JaegerEnvelope[list[str]]:
        pairs = await reads.run(query.operations, service, tenant=tenant)
        names = sorted({name for name, _ in pairs})
        return JaegerEnvelope[list[str]](data=names, total=len(names))

    @router.get(
        "/operations",
        operation_id="jaeger_v1_operations",
        response_model=JaegerEnvelope[list[JaegerOperation]],
        responses=_ERRORS,
        description="Span names with their kinds (`server`, `client`, ..., empty when unspecified).",
    )
    async def operations(
        tenant: Tenant,
        service: Annotated[str | None, Query(description="Service name (required).")] = None,
        span_kind: Annotated[str | None, Query(alias="spanKind", description="Only this kind, lowercase.")] = None,
    ) -> JaegerEnvelope[list[JaegerOperation]]:
        if not service:
            raise JaegerError(400, "parameter 'service' is required")
        found = model.operations(await reads.run(query.operations, service, tenant=tenant), span_kind)
        return JaegerEnvelope[list[JaegerOperation]](data=found, total=len(found))

    @router.get(
        "/traces",
        operation_id="jaeger_v1_find_traces",
        response_model=JaegerEnvelope[list[JaegerTrace]],
        responses=_ERRORS,
        description=(
            "Whole traces having a span that meets every filter (Jaeger's rule: duration bounds apply to that "
            "span), newest first. With `traceID` the other filters are ignored and each trace is looked up; "
            "those not found are listed in `errors`."
        ),
    )
    async def find_traces(
        tenant: Tenant,
        service: Annotated[str | None, Query(description="Service name (required unless `traceID`).")] = None,
        operation: Annotated[str | None, Query(description="Span name.")] = None,
        tag: Annotated[list[str] | None, Query(description="`key:value`, repeatable.")] = None,
        tags: Annotated[list[str] | None, Query(description='JSON object of strings, e.g. `{"error":"true"}`.')] = None,
        start: Annotated[int | None, Query(description="Window start, µs since epoch; default end - 2 days.")] = None,
        end: Annotated[int | None, Query(description="Window end, µs since epoch; default now.")] = None,
        lookback: Annotated[str | None, Query(description="Window length when `start` is absent: `1h`, `2d`.")] = None,
        min_duration: Annotated[str | None, Query(alias="minDuration", description="Go duration, `150ms`.")] = None,
        max_duration: Annotated[str | None, Query(alias="maxDuration", description="Go duration, `1.5s`.")] = None,
        limit: Annotated[
            int | None,
            Query(description=f"Most traces returned; default {params.DEFAULT_LIMIT}, at most {params.MAX_TRACES}."),
        ] = None,
        trace_ids: Annotated[list[str] | None, Query(alias="traceID", description="Trace IDs to fetch.")] = None,
    ) -> JaegerEnvelope[list[JaegerTrace]] | Response:
        if trace_ids:
            return await _by_ids(query, trace_ids, tenant, limits, reads)
        search = params.v1_search(
            service=service,
            operation=operation,
            tag=tag or (),
            tags=tags or (),
            start_us=start,
            end_us=end,
            lookback=lookback,
            min_duration=min_duration,
            max_duration=max_duration,
            limit=limit,
        )

        def answer() -> bytes:
            traces = model.traces_json(query.search_spans(search, tenant=tenant))
            return spliced(JaegerEnvelope[list[JaegerTrace]](data=[], total=len(traces)), "data", traces)

        return await reads.json(answer)

    @router.get(
        f"/traces/{{trace_id:{ANY_PATH}}}",
        operation_id="jaeger_v1_get_trace",
        response_model=JaegerEnvelope[list[JaegerTrace]],
        responses={**_ERRORS, 404: {"model": JaegerEnvelope[None], "description": "Unknown trace."}},
        description=(
            "One trace. IDs: 32 or 16 hex characters (any case; 16 are zero-padded) or base64. `start`/`end` "
            "(µs) are accepted as Jaeger's lookup hints; Hotspan finds the trace by ID alone."
        ),
    )
    async def get_trace(
        trace_id: str,
        tenant: Tenant,
        start: Annotated[int | None, Query(description="Hint, µs since epoch.")] = None,
        end: Annotated[int | None, Query(description="Hint, µs since epoch.")] = None,
        raw: Annotated[str | None, Query(description="Accepted for compatibility; traces are never adjusted.")] = None,
    ) -> Response:
        if raw:
            params.go_bool(raw, "raw")
        canonical = parse_trace_id(trace_id)

        def answer() -> JaegerEnvelope[list[JaegerTrace]]:
            trace = _bounded_trace(query, canonical, tenant, limits)
            if trace is None:
                raise JaegerError(404, "trace not found")
            return JaegerEnvelope[list[JaegerTrace]](data=[trace], total=1)

        return await reads.json(answer)

    @router.get(
        "/dependencies",
        operation_id="jaeger_v1_dependencies",
        response_model=JaegerEnvelope[list[JaegerDependency]],
        responses=_ERRORS,
        description="Service calls (parent→child span pairs across services) of spans starting in the window.",
    )
    async def dependencies(
        tenant: Tenant,
        end_ts: Annotated[
            int | None, Query(alias="endTs", description="Window end, ms since epoch; default now.")
        ] = None,
        lookback: Annotated[int | None, Query(description="Window length, ms; default one day.")] = None,
        service: Annotated[str | None, Query(description="Only calls from or to this service.")] = None,
    ) -> JaegerEnvelope[list[JaegerDependency]]:
        start_ns, end_ns = params.dependency_window(end_ts, lookback)
        rows = await reads.run(query.dependencies, start_ns, end_ns, tenant=tenant)
        links = [
            JaegerDependency(parent=parent, child=child, callCount=count)
            for parent, child, count in rows
            if not service or service in (parent, child)
        ]
        return JaegerEnvelope[list[JaegerDependency]](data=links, total=len(links))

    return router


async def _by_ids(
    query: QueryService, trace_ids: list[str], tenant: str | None, limits: TraceReadLimits, reads: ReadPool
) -> Response:
    """Jaeger's ``/api/traces?traceID=...``: every trace of ``tenant`` found (each bounded as by
    :func:`_bounded_trace`), and a 404 entry in ``errors`` per ID that is not (another tenant's trace is not found
    either)."""
    if len(trace_ids) > MAX_TRACE_IDS:
        raise JaegerError(400, f"too many traceID values: {len(trace_ids)} (at most {MAX_TRACE_IDS})")
    canonical = [parse_trace_id(text) for text in dict.fromkeys(trace_ids)]

    def answer() -> JaegerEnvelope[list[JaegerTrace]]:
        pages = query.trace_pages(canonical, tenant=tenant, limit=limits.max_spans)
        traces: list[JaegerTrace] = []
        missing: list[JaegerStructuredError] = []
        for trace_id in canonical:
            if trace_id in pages:
                traces.append(_jaeger_trace(pages[trace_id], trace_id, limits))
            else:
                missing.append(JaegerStructuredError(code=404, msg="trace not found", traceID=trace_id))
        return JaegerEnvelope[list[JaegerTrace]](data=traces, total=len(traces), errors=missing or None)

    return await reads.json(answer)


def _bounded_trace(
    query: QueryService, trace_id: str, tenant: str | None, limits: TraceReadLimits
) -> JaegerTrace | None:
    """Trace ``trace_id`` in Jaeger's model, at most ``limits.max_spans`` spans (the first by start; the trace's
    ``warnings`` say how many it has), or None when ``tenant`` has no such trace. Blocking."""
    page = query.trace_page(trace_id, tenant=tenant, limit=limits.max_spans)
    return _jaeger_trace(page, trace_id, limits) if page.span_count else None


def _jaeger_trace(page: BoundedTrace, trace_id: str, limits: TraceReadLimits) -> JaegerTrace:
    """A bounded read of trace ``trace_id`` (at least one span) in Jaeger's model, ``warnings`` saying how many spans
    it has when the page is not all of them."""
    trace = model.traces_from_frame(page.spans)[0]
    if page.partial:
        limits.count_truncated("jaeger_v1")
        trace.warnings = [limits.warning(trace_id, page.span_count)]
    return trace
