"""``GET /api/v1/traces/{trace_id}/view``: the trace page's model over REST, a window of visible rows at a time; and
``GET /api/v1/traces/{trace_id}/agent-graph``: the same view's agent graph (:mod:`analysis.agent_graph`).

Thin: parse, ask :class:`query.trace_view_cache.TraceViews` (the same kept views the trace page reads), shape the
answer. The rows are :func:`query.trace_rows.window`'s columns, so a client can draw a trace of any size without
fetching every span: collapse and aggregation state travel as parameters. Every read is limited to the caller's
tenant (:mod:`api.tenancy`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from analysis import STAGES
from api.errors import ApiError
from api.models import AgentEdge, AgentGraphResponse, ErrorResponse
from api.read_pool import READ_ERRORS, ReadPool
from api.tenancy import Tenant
from api.traces import TraceId
from query.trace_model import TraceView
from query.trace_rows import MAX_WINDOW_ROWS, MODES, Expansion, Mode, window
from query.trace_view_cache import TraceViews


class TraceOperation(BaseModel):
    service_name: str
    name: str = Field(description="Span name.")
    span_count: int = Field(description="Spans of the operation in the whole trace, each once.")
    duration_ns_sum: int = Field(description="Their summed duration, ns.")
    duration_ns_max: int = Field(description="The longest one, ns.")
    error_count: int = Field(description="Spans with status Error.")
    first_start_ns: int = Field(description="The first one's start, ns since the Unix epoch.")


class TraceViewResponse(BaseModel):
    trace_id: str
    start_time_unix_nano: int = Field(description="The trace's first span start, ns since the Unix epoch.")
    duration_ns: int = Field(description="First span start to last span end, ns.")
    span_count: int = Field(description="Spans in the view, each span ID once.")
    stored_spans: int = Field(
        description="Spans the store holds for the trace: more than `span_count` when the trace is larger than "
        "HOTSPAN_MAX_TRACE_SPANS and the view holds its first spans by start only, or when spans reuse a span ID "
        "(`duplicate_spans`)."
    )
    duplicate_spans: int = Field(
        description="Spans left out of the view because they share a span ID with another span of the trace (a "
        "re-export that renamed a span or moved its start, an instrumentation reusing IDs): the view keeps the "
        "one that ends last of each ID; the trace and Jaeger reads return every stored span."
    )
    services: list[str] = Field(description="The trace's services; the rows' `service` indexes this list.")
    stages: list[str] = Field(description="Stage names; the rows' `stage` and the pieces' `stage` index this list.")
    stage_totals_ns: dict[str, int] = Field(description="ns per stage on the critical paths of the trace's roots.")
    waiting_ns: int = Field(
        description="ns of the trace's duration on no span's traced time: critical path outside its spans' own "
        "intervals (work started after its parent returned, waited on untraced) and time no root's path covers. "
        "With one root, the stage totals and this sum to `duration_ns`."
    )
    dominant_stage: str | None
    operations: list[TraceOperation] | None = Field(
        None,
        description="When the view holds only the trace's first spans (`stored_spans` > `span_count`): the whole "
        "trace by operation, summed in the store (each span once), most summed time first; null otherwise.",
    )
    window: dict[str, Any] = Field(
        description="`total` visible rows, `offset`, and the window's `rows`, `pieces`, `critical`, `gaps`, "
        "`density`, `matches` as aligned column lists, times in ns after the trace's start "
        "(query.trace_rows.window)."
    )


MAX_INDEX = 2**31 - 1
"""Largest row, depth or span index a request may name (no trace holds more spans): larger values are a 422."""
SpanIndex = Annotated[int, Field(ge=0, le=MAX_INDEX)]

FRESH_HELP = (
    "Show the trace as stored now: the kept view only when the trace has not changed since it was built, else read "
    "again (what a trace page load does)."
)


def build_router(views: TraceViews, reads: ReadPool | None = None) -> APIRouter:
    """The trace-view route over ``views``, run whole on ``reads`` (:mod:`api.read_pool`; a pool of its own when
    omitted), never on the event loop."""
    router = APIRouter(prefix="/api/v1", tags=["traces"], responses=READ_ERRORS)
    reads = reads or ReadPool()

    @router.get(
        "/traces/{trace_id}/view",
        operation_id="trace_view",
        response_model=TraceViewResponse,
        responses={400: {"model": ErrorResponse}, 404: {"model": ErrorResponse}},
    )
    @reads.endpoint
    def trace_view(
        trace_id: TraceId,
        tenant: Tenant,
        offset: Annotated[int, Query(ge=0, le=MAX_INDEX, description="First visible row to return.")] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_WINDOW_ROWS, description="Rows to return.")] = 200,
        mode: Annotated[Mode, Query(description=f"Which subtrees are open: {', '.join(MODES)}.")] = "all",
        depth: Annotated[
            int, Query(ge=0, le=MAX_INDEX, description="`depth` mode: spans this deep and deeper are collapsed.")
        ] = 2,
        toggle: Annotated[list[SpanIndex] | None, Query(description="Span indices whose collapsed state flips")] = None,
        aggregate: Annotated[bool, Query(description="Group repeated siblings (large traces only).")] = True,
        opened: Annotated[list[SpanIndex] | None, Query(description="First spans of groups shown one by one.")] = None,
        search: Annotated[str, Query(max_length=200, description="Find in the trace; matches are revealed.")] = "",
        fresh: Annotated[bool, Query(description=FRESH_HELP)] = False,
    ) -> TraceViewResponse:
        """One window of the trace's visible rows, with the trace's services, stage totals and dominant stage."""
        read = views.load if fresh else views.get
        view = read(trace_id, tenant=tenant)
        if view is None:
            raise ApiError(404, "trace_not_found", f"trace {trace_id} not found")
        expansion = Expansion(
            mode=mode,
            depth=depth,
            toggled=frozenset(toggle or ()),
            aggregate=aggregate,
            opened=frozenset(opened or ()),
            search=search,
        )
        rows = window(view, expansion, offset, limit)
        return _response(view, rows)

    @router.get(
        "/traces/{trace_id}/agent-graph",
        operation_id="trace_agent_graph",
        response_model=AgentGraphResponse,
        responses={400: {"model": ErrorResponse}, 404: {"model": ErrorResponse}},
    )
    @reads.endpoint
    def trace_agent_graph(trace_id: TraceId, tenant: Tenant) -> AgentGraphResponse:
        """The trace's agent graph: which agent called which model, tool, retriever or agent, how often, for how
        long and for how much of the critical path (GenAI semconv, OpenInference, OpenLLMetry and Langfuse agent
        spans; the root service stands for the agent where none is marked)."""
        view = views.get(trace_id, tenant=tenant)
        if view is None:
            raise ApiError(404, "trace_not_found", f"trace {trace_id} not found")
        edges = [AgentEdge(**row) for row in view.agent_graph.iter_rows(named=True)]
        return AgentGraphResponse(trace_id=view.trace_id, duration_ns=view.duration_ns, edges=edges)

    return router


def _response(view: TraceView, rows: dict[str, Any]) -> TraceViewResponse:
    lane = view.lane
    return TraceViewResponse(
        trace_id=view.trace_id,
        start_time_unix_nano=view.start_ns,
        duration_ns=view.duration_ns,
        span_count=view.size,
        stored_spans=view.stored_spans,
        duplicate_spans=view.duplicates,
        services=list(view.services),
        stages=list(STAGES),
        stage_totals_ns={stage: int(ns) for stage, ns in zip(STAGES, lane.totals_ns, strict=True) if ns},
        waiting_ns=lane.waiting_ns,
        dominant_stage=lane.dominant,
        operations=(
            None
            if view.operations is None
            else [TraceOperation(**row) for row in view.operations.iter_rows(named=True)]
        ),
        window=rows,
    )
