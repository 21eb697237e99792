"""``/api/v1/red``: rate, errors and duration per service or operation, from the per-minute RED rollup.

Thin: parse, call the query room (:meth:`query.service.QueryService.red`, as the Services page does), shape the
answer. Every read is limited to the caller's tenant (:mod:`api.tenancy`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from api.errors import ApiError
from api.models import ErrorResponse
from api.read_pool import READ_ERRORS, ReadPool
from api.tenancy import Tenant
from api.window import MAX_STEP_S, EndNs, StartNs, window
from query.service import QueryService
from query.store import RedQuery
from units import NS_PER_MS, NS_PER_S

MAX_STEPS = 2_000
"""Most series points per group; a longer window needs a larger ``step_s``."""
SPAN_KINDS = ("Server", "Client", "Producer", "Consumer", "Internal", "Unspecified")


class RedPoint(BaseModel):
    start_ns: int = Field(description="Step start, ns since the Unix epoch (aligned to step_s).")
    calls: int
    errors: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None


class RedGroup(BaseModel):
    service: str
    overflow: bool = Field(
        False,
        description="The groups beyond HOTSPAN_CARDINALITY_LIMIT (fewer calls than every other group), folded into "
        "this one, last, with empty names (otel_metric_overflow).",
    )
    operation: str | None = Field(None, description="Span name; only when grouped by operation.")
    span_kind: str | None = Field(None, description="Only when grouped by operation.")
    calls: int
    errors: int = Field(description="Spans with status Error.")
    error_rate: float = Field(description="errors / calls, 0..1.")
    rate_per_s: float = Field(description="calls per second over the window.")
    avg_ms: float
    max_ms: float
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    series: list[RedPoint] = Field(description="One point per step that has calls.")


class RedResponse(BaseModel):
    group_by: str
    start_ns: int = Field(description="Window start as read: the start of its first minute, ns.")
    end_ns: int
    step_s: int
    groups: list[RedGroup]


def build_router(query: QueryService, limit: int | None = None, reads: ReadPool | None = None) -> APIRouter:
    """``GET /api/v1/red`` over the query room ``query``: at most ``limit`` groups, the rest folded into one overflow
    group. The route runs whole on ``reads`` (:mod:`api.read_pool`; a pool of its own when omitted), never on the
    event loop."""
    router = APIRouter(prefix="/api/v1", tags=["red"], responses=READ_ERRORS)
    reads = reads or ReadPool()

    @router.get("/red", operation_id="get_red", response_model=RedResponse, responses={400: {"model": ErrorResponse}})
    @reads.endpoint
    def red(
        tenant: Tenant,
        group_by: Annotated[
            Literal["service", "operation"], Query(description="`service` or `operation`.")
        ] = "service",
        start_ns: StartNs = None,
        end_ns: EndNs = None,
        step_s: Annotated[
            int, Query(ge=60, le=MAX_STEP_S, description="Series step in seconds, a multiple of 60.")
        ] = 60,
        service: Annotated[str | None, Query(description="Only this service.")] = None,
        span_kind: Annotated[
            str | None, Query(description="Only spans of this kind: `Server`, `Client`, `Producer`, ...")
        ] = None,
    ) -> RedResponse:
        """Calls, errors, error rate and p50/p95/p99 duration (ms) per service, or per (service, operation,
        span kind), over the window and per step. Rollups are per minute: the window starts at a whole minute
        and ``step_s`` must be a multiple of 60."""
        start, end = window(start_ns, end_ns)
        if step_s % 60:
            raise ApiError(400, "invalid_parameter", f"step_s: must be a multiple of 60, got {step_s}")
        if (end - start) // (step_s * NS_PER_S) > MAX_STEPS:
            raise ApiError(400, "invalid_parameter", f"step_s: more than {MAX_STEPS} steps; use a larger step")
        if span_kind is not None and span_kind not in SPAN_KINDS:
            raise ApiError(400, "invalid_parameter", f"span_kind: one of {', '.join(SPAN_KINDS)}")
        asked = RedQuery(group_by, start, end, step_s, service=service or None, span_kind=span_kind, limit=limit)
        result = query.red(asked, tenant=tenant)
        read_start = start - start % (60 * NS_PER_S)
        seconds = max((end - read_start) / NS_PER_S, 1.0)
        keys = ["overflow", "service", "operation", "span_kind"] if group_by == "operation" else ["overflow", "service"]
        points: dict[tuple, list[RedPoint]] = {}
        for row in result.series.iter_rows(named=True):
            points.setdefault(tuple(row[k] for k in keys), []).append(
                RedPoint(
                    start_ns=row["bucket_start_ns"],
                    calls=row["calls"],
                    errors=row["errors"],
                    p50_ms=_ms(row["p50_ns"]),
                    p95_ms=_ms(row["p95_ns"]),
                    p99_ms=_ms(row["p99_ns"]),
                )
            )
        groups = [
            RedGroup(
                service=row["service"],
                overflow=row["overflow"],
                operation=row.get("operation"),
                span_kind=row.get("span_kind"),
                calls=row["calls"],
                errors=row["errors"],
                error_rate=row["errors"] / row["calls"] if row["calls"] else 0.0,
                rate_per_s=row["calls"] / seconds,
                avg_ms=round(row["duration_sum_ns"] / row["calls"] / NS_PER_MS, 3) if row["calls"] else 0.0,
                max_ms=round(row["duration_max_ns"] / NS_PER_MS, 3),
                p50_ms=_ms(row["p50_ns"]),
                p95_ms=_ms(row["p95_ns"]),
                p99_ms=_ms(row["p99_ns"]),
                series=points.get(tuple(row[k] for k in keys), []),
            )
            for row in result.totals.iter_rows(named=True)
        ]
        return RedResponse(group_by=group_by, start_ns=read_start, end_ns=end, step_s=step_s, groups=groups)

    return router


def _ms(ns: float | None) -> float | None:
    """ns → ms rounded to µs; None stays None."""
    return None if ns is None else round(ns / NS_PER_MS, 3)
