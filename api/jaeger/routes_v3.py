"""Jaeger query API v3 over HTTP (``/api/v3/...``): Jaeger's grpc-gateway binding, answering OTLP JSON.

Parameter names are Jaeger's: the canonical camelCase ones (``query.serviceName``, ``query.startTimeMin``,
``spanKind``...) and the older snake_case aliases (``query.service_name``, ``span_kind``...), which Grafana's
Jaeger backend still sends; the canonical name wins when both come. Times are RFC 3339 (up to ns digits),
durations Go duration strings. Traces come back as ``{"result": {"resourceSpans": [...]}}``
(:mod:`api.jaeger.otlp`); a lookup or search that finds nothing is a 404, as in Jaeger; failures are
``{"error": {"httpCode", "message"}}`` (:mod:`api.jaeger.errors`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, Field

from api.errors import ApiError
from api.jaeger import model, otlp, params
from api.jaeger.errors import JaegerError, JaegerV3Route
from api.jaeger.params import Named, pick
from api.jaeger.paths import ANY_PATH
from api.read_pool import ReadPool, spliced
from api.tenancy import Tenant
from api.trace_limits import TraceReadLimits
from api.traces import parse_trace_id
from query.service import QueryService
from query.store import TraceQuery

NOT_FOUND = "No traces found"


class V3ServicesResponse(BaseModel):
    services: list[str]


class V3OperationsResponse(BaseModel):
    operations: list[model.JaegerOperation]


class V3TracesResponse(BaseModel):
    result: dict[str, Any] = Field(description="OTLP `TracesData` JSON: `{resourceSpans: [...]}`, hex IDs, ns times.")


class V3ErrorDetails(BaseModel):
    httpCode: int = Field(description="The HTTP status again.")
    message: str


class V3Error(BaseModel):
    """Jaeger's ``GRPCGatewayError``."""

    error: V3ErrorDetails


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": V3Error, "description": "Bad parameter, named in the message."},
    404: {"model": V3Error, "description": "Nothing found (`No traces found`)."},
    413: {"model": V3Error, "description": "The read would exceed its budget (spans of a search, memory)."},
    503: {"model": V3Error, "description": "Too many reads at once, or one ran past its time budget; `Retry-After`."},
}


def find_traces_query(
    service_name: Annotated[str | None, Query(alias="query.serviceName", description="Service name.")] = None,
    operation_name: Annotated[str | None, Query(alias="query.operationName", description="Span name.")] = None,
    attributes: Annotated[
        str | None, Query(alias="query.attributes", description='JSON object of strings, `{"http.method":"GET"}`.')
    ] = None,
    start_time_min: Annotated[
        str | None, Query(alias="query.startTimeMin", description="Required; RFC 3339, inclusive.")
    ] = None,
    start_time_max: Annotated[
        str | None, Query(alias="query.startTimeMax", description="Required; RFC 3339, exclusive.")
    ] = None,
    duration_min: Annotated[str | None, Query(alias="query.durationMin", description="Go duration.")] = None,
    duration_max: Annotated[str | None, Query(alias="query.durationMax", description="Go duration.")] = None,
    search_depth: Annotated[
        str | None,
        Query(
            alias="query.searchDepth",
            description=f"Most traces; default {params.DEFAULT_LIMIT}, at most {params.MAX_TRACES} (more: that many).",
        ),
    ] = None,
    raw_traces: Annotated[str | None, Query(alias="query.rawTraces", description="Accepted; never adjusted.")] = None,
    filter_expression: Annotated[
        str | None, Query(alias="query.filter", description="Not supported: refused with a 400.")
    ] = None,
    service_name_old: Annotated[str | None, Query(alias="query.service_name", include_in_schema=False)] = None,
    operation_name_old: Annotated[str | None, Query(alias="query.operation_name", include_in_schema=False)] = None,
    start_time_min_old: Annotated[str | None, Query(alias="query.start_time_min", include_in_schema=False)] = None,
    start_time_max_old: Annotated[str | None, Query(alias="query.start_time_max", include_in_schema=False)] = None,
    duration_min_old: Annotated[str | None, Query(alias="query.duration_min", include_in_schema=False)] = None,
    duration_max_old: Annotated[str | None, Query(alias="query.duration_max", include_in_schema=False)] = None,
    search_depth_old: Annotated[str | None, Query(alias="query.search_depth", include_in_schema=False)] = None,
    num_traces_old: Annotated[str | None, Query(alias="query.num_traces", include_in_schema=False)] = None,
    raw_traces_old: Annotated[str | None, Query(alias="query.raw_traces", include_in_schema=False)] = None,
) -> TraceQuery:
    """The reader query of a v3 search, each parameter taken under its canonical name or its older alias."""
    return params.v3_search(
        service=pick(Named(service_name, "query.serviceName"), Named(service_name_old, "query.service_name")),
        operation=pick(Named(operation_name, "query.operationName"), Named(operation_name_old, "query.operation_name")),
        attributes=Named(attributes, "query.attributes"),
        start_min=pick(Named(start_time_min, "query.startTimeMin"), Named(start_time_min_old, "query.start_time_min")),
        start_max=pick(Named(start_time_max, "query.startTimeMax"), Named(start_time_max_old, "query.start_time_max")),
        duration_min=pick(Named(duration_min, "query.durationMin"), Named(duration_min_old, "query.duration_min")),
        duration_max=pick(Named(duration_max, "query.durationMax"), Named(duration_max_old, "query.duration_max")),
        search_depth=pick(
            Named(search_depth, "query.searchDepth"),
            Named(search_depth_old, "query.search_depth"),
            Named(num_traces_old, "query.num_traces"),
        ),
        raw_traces=pick(Named(raw_traces, "query.rawTraces"), Named(raw_traces_old, "query.raw_traces")),
        filter_expression=Named(filter_expression, "query.filter"),
    )


def build_router(
    query: QueryService, limits: TraceReadLimits | None = None, reads: ReadPool | None = None
) -> APIRouter:
    """Jaeger API v3 routes over the query room ``query``; a trace looked up by ID holds at most ``limits.max_spans``
    spans (the first by start; a ``Warning`` header says so, OTLP JSON having no place for it: :mod:`api.trace_limits`).
    Every read, and the answer built from it, runs on ``reads`` (:mod:`api.read_pool`; a pool of its own when
    omitted)."""
    router = APIRouter(prefix="/api/v3", tags=["jaeger"], route_class=JaegerV3Route)
    limits = limits or TraceReadLimits()
    reads = reads or ReadPool()

    @router.get(
        "/services",
        operation_id="jaeger_v3_services",
        response_model=V3ServicesResponse,
        description="Service names, sorted.",
    )
    async def services(tenant: Tenant) -> V3ServicesResponse:
        return V3ServicesResponse(services=await reads.run(query.services, tenant=tenant))

    @router.get(
        "/operations",
        operation_id="jaeger_v3_operations",
        response_model=V3OperationsResponse,
        description="Span names of a service with their kinds (lowercase; `internal` when unspecified).",
    )
    async def operations(
        tenant: Tenant,
        service: Annotated[str | None, Query(description="Service name.")] = None,
        span_kind: Annotated[str | None, Query(alias="spanKind", description="Only this kind, lowercase.")] = None,
        span_kind_old: Annotated[str | None, Query(alias="span_kind", include_in_schema=False)] = None,
    ) -> V3OperationsResponse:
        pairs = await reads.run(query.operations, service or "", tenant=tenant)
        kind = span_kind or span_kind_old
        return V3OperationsResponse(operations=model.operations(pairs, kind, unspecified="internal"))

    @router.get(
        "/traces",
        operation_id="jaeger_v3_find_traces",
        response_model=V3TracesResponse,
        responses=_ERRORS,
        description="Whole traces having a span that meets every filter; 404 when none does.",
    )
    async def find_traces(search: Annotated[TraceQuery, Depends(find_traces_query)], tenant: Tenant) -> Response:
        def answer() -> bytes:
            frame = query.search_spans(search, tenant=tenant)
            if frame.height == 0:
                raise JaegerError(404, NOT_FOUND)
            entries = otlp.resource_spans_json(frame)
            return spliced(V3TracesResponse(result={"resourceSpans": []}), "resourceSpans", entries)

        return await reads.json(answer)

    @router.get(
        f"/traces/{{trace_id:{ANY_PATH}}}",
        operation_id="jaeger_v3_get_trace",
        response_model=V3TracesResponse,
        responses=_ERRORS,
        description=(
            "One trace as OTLP JSON. IDs: 32 or 16 hex characters or base64. `startTime`/`endTime` (RFC 3339) "
            "are accepted as Jaeger's lookup hints; Hotspan finds the trace by ID alone."
        ),
    )
    async def get_trace(
        trace_id: str,
        tenant: Tenant,
        start_time: Annotated[str | None, Query(alias="startTime", description="Hint, RFC 3339.")] = None,
        end_time: Annotated[str | None, Query(alias="endTime", description="Hint, RFC 3339.")] = None,
        raw_traces: Annotated[str | None, Query(alias="rawTraces", description="Accepted; never adjusted.")] = None,
        start_time_old: Annotated[str | None, Query(alias="start_time", include_in_schema=False)] = None,
        end_time_old: Annotated[str | None, Query(alias="end_time", include_in_schema=False)] = None,
        raw_traces_old: Annotated[str | None, Query(alias="raw_traces", include_in_schema=False)] = None,
    ) -> Response:
        for hint in (
            pick(Named(start_time, "startTime"), Named(start_time_old, "start_time")),
            pick(Named(end_time, "endTime"), Named(end_time_old, "end_time")),
        ):
            if hint.value:
                params.rfc3339_ns(hint.value, hint.name)
        raw = pick(Named(raw_traces, "rawTraces"), Named(raw_traces_old, "raw_traces"))
        if raw.value:
            params.go_bool(raw.value, raw.name)
        try:
            canonical = parse_trace_id(trace_id)
        except ApiError as exc:
            raise JaegerError(400, f"malformed parameter {exc.message}") from None
        page = await reads.run(query.trace_page, canonical, tenant=tenant, limit=limits.max_spans)
        if page.span_count == 0:
            raise JaegerError(404, NOT_FOUND)
        headers = None
        if page.partial:
            limits.count_truncated("jaeger_v3")
            headers = {"Warning": f'299 hotspan "{limits.warning(canonical, page.span_count)}"'}
        return await reads.json(lambda: V3TracesResponse(result=otlp.traces_data(page.spans)), headers)

    return router
