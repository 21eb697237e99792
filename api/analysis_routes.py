"""``/api/v1`` routes of the LLM-aware analysis: per trace (critical path, statistics, flame graph, stages) and
over a window (stage percentiles and shares, hotspots, aggregated flame graph).

Thin: parse, call :class:`query.analysis_service.AnalysisService`, shape the answer. Per-trace routes
analyse the trace's spans on the fly, so they answer before the trace pipeline has run; window routes read the
pipeline's tables, so they cover requests quiet for ``trace_idle_s``. Every read is limited to the caller's
tenant (:mod:`api.tenancy`). Units are in every field name: ``_ns`` nanoseconds (times since the Unix epoch),
``_ms`` milliseconds, ``share``/``percent`` fractions and percentages.

Two "tenants" meet here: the caller's (from the bearer token, never a parameter) decides what can be read at
all; the ``tenant`` query parameter and ``group_by=tenant`` are about the tenant a request's own spans name
(``tenant_id`` / ``tenant.id`` attribute, e.g. set from W3C baggage by ``hotspan_sdk``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import polars as pl
from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from api.errors import ApiError
from api.models import ErrorResponse
from api.read_pool import READ_ERRORS, ReadPool
from api.tenancy import Tenant
from api.traces import TraceId
from api.window import MAX_NS, MAX_STEP_S, StartNs, window
from query.analysis_service import AnalysisService, StatisticsGroup
from query.store import AnalysisFilter
from units import NS_PER_S

_T = TypeVar("_T")
MAX_BUCKETS = 2_000
"""Most time buckets of ``/stages/timeseries``; a longer window needs a larger ``bucket_s``."""

ERRORS: dict[int | str, dict[str, Any]] = {400: {"model": ErrorResponse}}
TRACE_ERRORS: dict[int | str, dict[str, Any]] = {400: {"model": ErrorResponse}, 404: {"model": ErrorResponse}}

# Analysis reads include the window's end (storage.analysis_store.AnalysisFilter); the shared EndNs does not say.
EndNs = Annotated[
    int | None, Query(ge=0, le=MAX_NS, description="Window end (inclusive), ns since the Unix epoch; default now.")
]
Service = Annotated[str | None, Query(description="Service name (exact).")]
RequestTenant = Annotated[
    str | None,
    Query(
        alias="tenant",
        description="Only requests whose spans name this tenant (`tenant_id` / `tenant.id` attribute). Not the "
        "caller's tenant, which comes from the bearer token.",
    ),
]


# --- response models -----------------------------------------------------------------------------------------


class CriticalPathSection(BaseModel):
    span_id: str = Field(description="The span the section belongs to; empty for time no span covers (untraced).")
    service_name: str
    name: str = Field(description="Span name (operation).")
    stage: str = Field(description="Stage of this section (a vLLM span's sections are cut at its phases).")
    start_ns: int = Field(description="Section start, ns since the Unix epoch.")
    end_ns: int = Field(description="Section end, ns since the Unix epoch.")
    duration_ns: int


class CriticalPathResponse(BaseModel):
    trace_id: str
    total_ns: int = Field(description="The request's window, ns; the sections' durations sum to it.")
    sections: list[CriticalPathSection] = Field(description="Sections of the root's critical path, in time order.")


class StatisticsRow(BaseModel):
    service_name: str | None = Field(None, description="Absent when grouped by operation only.")
    name: str | None = Field(None, description="Span name; absent when grouped by service only.")
    count: int
    total_ms: float
    avg_ms: float
    min_ms: float
    max_ms: float
    self_total_ms: float
    self_avg_ms: float
    self_min_ms: float
    self_max_ms: float
    percent: float | None = Field(description="self_total_ms as % of the trace's duration (Jaeger UI's column).")


class StatisticsResponse(BaseModel):
    trace_id: str
    group_by: str
    rows: list[StatisticsRow] = Field(description="Heaviest self time first.")


class FlameNode(BaseModel):
    id: str = Field(description="Node ID (16 hex digits; `root` for the virtual root).")
    parent: str = Field(description="Parent node ID; empty for the root.")
    label: str = Field(description="`service:operation`; the root's names what it aggregates.")
    service_name: str
    name: str
    depth: int = Field(description="0 for the root, 1 for top-level spans.")
    self_ns: int = Field(description="Self time of the node's spans, ns.")
    total_ns: int = Field(description="self_ns plus the children's total_ns (icicle value, branchvalues=total).")
    count: int = Field(description="Spans in the node; requests for the root.")


class TraceFlameGraphResponse(BaseModel):
    trace_id: str
    nodes: list[FlameNode] = Field(description="Root first; flat, ready for a Plotly icicle.")


class TraceStagesResponse(BaseModel):
    trace_id: str
    root_span_id: str
    total_ns: int = Field(
        description="The request window's duration, ns: the request's end-to-end latency (the root span's, run on "
        "to the end of work started in it that outlived it, or the envelope of the spans where the root is missing "
        "or never ended, as data_quality says)."
    )
    stages_ns: dict[str, int] = Field(
        description="Critical-path attribution: ns per stage (every stage, 0 when absent); sums to total_ns."
    )
    ttft_ns: int | None = Field(description="Time to first token of the first LLM call reporting one, ns.")
    tpot_ns: float | None = Field(description="Time per output token over the LLM calls, ns per token.")
    wall_clock_stages_ns: dict[str, int] = Field(
        description="Wall-clock attribution: each instant split among the deepest active spans (a sampling "
        "profiler's view), whole ns per stage (shares rounded by the largest remainder method); sums to total_ns."
    )
    disagreements: list[str] = Field(
        description="Stages whose two attributions differ by at least 5 % of total_ns (e.g. a wrapper sibling "
        "that hides work from the critical path)."
    )
    data_quality: list[str] = Field(
        description="How far to trust the numbers, one sentence per concern: the window is the envelope of the "
        "spans (root missing or never ended), the root lasts far longer than everything under it, work outlived "
        "the span that started it (kept whole, the spans above it analysed as ending with it, and how far the "
        "window runs past the root's end), a server's spans were moved into their caller's span against clock "
        "skew (and by how much), or spans were analysed under another parent than they name. Empty "
        "when none."
    )


class Percentiles(BaseModel):
    requests: int = Field(description="Requests reporting the metric.")
    p50_ns: float | None
    p95_ns: float | None
    p99_ns: float | None
    mean_ns: float | None


class StagePercentiles(BaseModel):
    stage: str
    p50_ns: float = Field(description="Per-request stage time (critical path), ns; 0 for requests without it.")
    p95_ns: float
    p99_ns: float
    mean_ns: float
    share_of_e2e: float | None = Field(description="Stage total / end-to-end total over the group, 0..1.")


class WindowQuality(BaseModel):
    """How many of a group's requests rest on a repaired window (the trace's `data_quality`, counted)."""

    enveloped: int = Field(description="Requests whose root is missing or never ended: the window is the envelope.")
    attached: int = Field(description="Requests with orphans or second roots analysed under the root.")
    outliving: int = Field(
        description="Requests with work that outlived the span that started it, kept whole (its ancestors, the "
        "root among them, analysed as ending with it)."
    )
    implausible_root: int = Field(description="Requests whose root lasts far longer than everything under it.")
    reattached: int = Field(description="Requests with spans analysed under another parent than they name.")
    unrecorded: int = Field(description="Requests analysed before data quality was stored, counted in none above.")


class StageGroup(BaseModel):
    group: str = Field(description='Root service, model or request tenant (`""`: not named); `""` ungrouped.')
    requests: int
    e2e: Percentiles = Field(description="End-to-end latency (the request window's duration), ns.")
    ttft: Percentiles = Field(description="Time to first token, ns.")
    tpot: Percentiles = Field(description="Time per output token, ns per token.")
    stages: list[StagePercentiles] = Field(description="Every stage, in pipeline order.")
    data_quality: WindowQuality = Field(description="Requests of the group whose window the analysis repaired.")


class StagesResponse(BaseModel):
    start_ns: int
    end_ns: int
    group_by: str | None
    groups: list[StageGroup]


class ModelUsage(BaseModel):
    model: str = Field(description='Model of the calls (`""`: the calls name none).')
    requests: int = Field(description="Requests with calls of this model.")
    llm_calls: int = Field(description="Model calls the requests made.")
    input_tokens: int = Field(description="Input tokens, cached ones included.")
    output_tokens: int = Field(description="Output tokens, reasoning ones included.")
    cached_input_tokens: int
    reasoning_tokens: int
    cost: float | None = Field(description="In `currency`; null when the price table does not price the model.")


class UsageGroup(BaseModel):
    group: str = Field(description='Root service, model or request tenant; `""` ungrouped.')
    llm_calls: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    reasoning_tokens: int
    cost: float | None = Field(description="Sum over the models; null when one of them is not priced.")
    models: list[ModelUsage]


class UsageResponse(BaseModel):
    start_ns: int
    end_ns: int
    group_by: str | None
    currency: str = Field(description="Currency of every cost (the price table's, `HOTSPAN_PRICES`).")
    groups: list[UsageGroup]


class StageSharePoint(BaseModel):
    bucket_start_ns: int = Field(description="Bucket start (of request start), ns since the epoch, aligned to it.")
    stage: str
    requests: int
    stage_ns: int = Field(description="Summed critical-path time of the stage in the bucket, ns.")
    e2e_ns: int = Field(description="Summed end-to-end latency of the bucket's requests, ns.")
    share_of_e2e: float | None = Field(description="stage_ns / e2e_ns, 0..1.")


class StageSharesResponse(BaseModel):
    start_ns: int
    end_ns: int
    bucket_s: int
    points: list[StageSharePoint] = Field(description="Per bucket with requests, every stage, in pipeline order.")


class HotspotRank(BaseModel):
    service_name: str
    name: str = Field(description="Span name (operation).")
    spans: int
    self_total_ns: int
    self_p95_ns: float
    self_mean_ns: float
    duration_total_ns: int
    hotspot_spans: int = Field(description="Spans flagged (static threshold, rolling p95 or SDK).")
    self_share: float | None = Field(description="self_total_ns / all self time in the window, 0..1.")
    p95_share: float | None = Field(description="self_p95_ns / sum of every pair's self_p95_ns, 0..1.")


class FlaggedSpan(BaseModel):
    trace_id: str
    span_id: str
    service_name: str
    name: str
    stage: str
    start_time_unix_nano: int
    duration_ns: int
    self_time_ns: int
    reason: str = Field(description="`static` (rule), `p95` (rolling p95 of its operation) or `sdk` (flagged).")
    threshold_ms: float | None = Field(description="The threshold crossed, ms; null for an SDK flag without one.")


class HotspotsResponse(BaseModel):
    start_ns: int
    end_ns: int
    by_self_time: list[HotspotRank] = Field(description="(service, operation) by total self time, heaviest first.")
    by_p95_self_time: list[HotspotRank] = Field(description="(service, operation) by p95 self time.")
    flagged_spans: list[FlaggedSpan] = Field(description="Flagged spans, longest first.")


class FlameGraphResponse(BaseModel):
    start_ns: int
    end_ns: int
    traces: int = Field(description="Requests aggregated.")
    nodes: list[FlameNode] = Field(description="Root first; flat, ready for a Plotly icicle.")


# --- routes --------------------------------------------------------------------------------------------------


def build_router(service: AnalysisService, reads: ReadPool | None = None) -> APIRouter:
    """The analysis routes over ``service``; each runs whole on ``reads`` (:mod:`api.read_pool`; a pool of its own
    when omitted), never on the event loop."""
    router = APIRouter(prefix="/api/v1", tags=["analysis"], responses=READ_ERRORS)
    reads = reads or ReadPool()

    @router.get(
        "/traces/{trace_id}/critical-path",
        operation_id="get_trace_critical_path",
        response_model=CriticalPathResponse,
        responses=TRACE_ERRORS,
    )
    @reads.endpoint
    def critical_path(trace_id: TraceId, owner: Tenant) -> CriticalPathResponse:
        """The critical path of the trace's root span (Jaeger UI's semantics: FOLLOWS_FROM children left out,
        overflowing children clamped), as sections with their span, stage and times (ns)."""
        sections = _trace(service.trace_critical_path, trace_id, owner)
        rows = [CriticalPathSection(**row) for row in sections.iter_rows(named=True)]
        return CriticalPathResponse(trace_id=trace_id, total_ns=sum(r.duration_ns for r in rows), sections=rows)

    @router.get(
        "/traces/{trace_id}/statistics",
        operation_id="get_trace_statistics",
        response_model=StatisticsResponse,
        responses=TRACE_ERRORS,
    )
    @reads.endpoint
    def statistics(
        trace_id: TraceId,
        owner: Tenant,
        group_by: Annotated[
            StatisticsGroup, Query(description="`service_operation` (default), `service` or `operation`.")
        ] = "service_operation",
    ) -> StatisticsResponse:
        """Jaeger UI's Trace Statistics: per group, count, total/avg/min/max duration and self time (ms), and
        self time as a percentage of the trace's duration."""
        table = _trace(service.trace_statistics, trace_id, owner, group_by)
        return StatisticsResponse(
            trace_id=trace_id, group_by=group_by, rows=[StatisticsRow(**row) for row in table.iter_rows(named=True)]
        )

    @router.get(
        "/traces/{trace_id}/flamegraph",
        operation_id="get_trace_flamegraph",
        response_model=TraceFlameGraphResponse,
        responses=TRACE_ERRORS,
    )
    @reads.endpoint
    def trace_flamegraph(trace_id: TraceId, owner: Tenant) -> TraceFlameGraphResponse:
        """The trace's flame graph weighted by self time: one node per path of `service:operation` from the
        root (same-named siblings merged), as a flat list under a virtual root."""
        nodes = _trace(service.trace_flamegraph, trace_id, owner)
        return TraceFlameGraphResponse(trace_id=trace_id, nodes=_nodes(nodes))

    @router.get(
        "/traces/{trace_id}/stages",
        operation_id="get_trace_stages",
        response_model=TraceStagesResponse,
        responses=TRACE_ERRORS,
    )
    @reads.endpoint
    def trace_stages(trace_id: TraceId, owner: Tenant) -> TraceStagesResponse:
        """Where the request's time went: ns per stage along the critical path (summing to the root span's
        duration, `total_ns`), TTFT and TPOT, and the wall-clock attribution beside it."""
        stages = _trace(service.trace_stages, trace_id, owner)
        return TraceStagesResponse(**vars(stages))

    @router.get("/stages", operation_id="get_stages", response_model=StagesResponse, responses=ERRORS)
    @reads.endpoint
    def stages(
        owner: Tenant,
        start_ns: StartNs = None,
        end_ns: EndNs = None,
        service_name: Annotated[str | None, Query(alias="service", description="Root service of the request.")] = None,
        model: Annotated[str | None, Query(description="Model of the request (`gen_ai.request.model`).")] = None,
        request_tenant: RequestTenant = None,
        group_by: Annotated[
            Literal["service", "model", "tenant"] | None,
            Query(description="`service` (root service), `model`, `tenant` (request tenant); none: one group."),
        ] = None,
    ) -> StagesResponse:
        """Over the analysed requests starting in the window: per group, p50/p95/p99/mean of each stage's
        critical-path time and its share of end-to-end latency, p50/p95/p99 of e2e latency, TTFT, TPOT, and how
        many requests rest on a repaired window (`data_quality`: root missing or never ended, orphans attached,
        work kept past the span that started it)."""
        start, end = window(start_ns, end_ns)
        where = AnalysisFilter(start, end, service=service_name, request_tenant=request_tenant, model=model)
        report = service.stages(where, group_by or "", tenant=owner)
        by_group: dict[str, list[StagePercentiles]] = {}
        for row in report.percentiles.iter_rows(named=True):
            by_group.setdefault(row["group"], []).append(StagePercentiles(**_without(row, "group", "requests")))
        quality = {
            row["group"]: WindowQuality(**_without(row, "group", "requests"))
            for row in report.quality.iter_rows(named=True)
        }
        groups = [
            StageGroup(
                group=row["group"],
                requests=row["requests"],
                e2e=_percentiles(row, "e2e"),
                ttft=_percentiles(row, "ttft"),
                tpot=_percentiles(row, "tpot"),
                stages=by_group.get(row["group"], []),
                data_quality=quality[row["group"]],
            )
            for row in report.latency.iter_rows(named=True)
        ]
        return StagesResponse(start_ns=start, end_ns=end, group_by=group_by, groups=groups)

    @router.get("/usage", operation_id="get_usage", response_model=UsageResponse, responses=ERRORS)
    @reads.endpoint
    def usage(
        owner: Tenant,
        start_ns: StartNs = None,
        end_ns: EndNs = None,
        service_name: Annotated[str | None, Query(alias="service", description="Root service of the request.")] = None,
        request_tenant: RequestTenant = None,
        group_by: Annotated[
            Literal["service", "model", "tenant"] | None,
            Query(description="`service` (root service), `model` (of the calls), `tenant` (request tenant)."),
        ] = None,
    ) -> UsageResponse:
        """Model calls, tokens and cost over the analysed requests starting in the window, per group and model
        (cost from the price table, `HOTSPAN_PRICES`)."""
        start, end = window(start_ns, end_ns)
        where = AnalysisFilter(start, end, service=service_name, request_tenant=request_tenant)
        frame = service.usage(where, group_by or "", tenant=owner)
        groups = []
        for (group,), rows in frame.group_by("group", maintain_order=True):
            models = [ModelUsage(**_without(row, "group")) for row in rows.iter_rows(named=True)]
            costs = [m.cost for m in models]
            totals = {
                name: sum(getattr(m, name) for m in models)
                for name in ("llm_calls", "input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens")
            }
            cost = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
            groups.append(UsageGroup(group=str(group), cost=cost, models=models, **totals))
        return UsageResponse(start_ns=start, end_ns=end, group_by=group_by, currency=service.currency, groups=groups)

    @router.get(
        "/stages/timeseries",
        operation_id="get_stage_shares_over_time",
        response_model=StageSharesResponse,
        responses=ERRORS,
    )
    @reads.endpoint
    def stage_shares(
        owner: Tenant,
        start_ns: StartNs = None,
        end_ns: EndNs = None,
        bucket_s: Annotated[int, Query(ge=1, le=MAX_STEP_S, description="Bucket width, seconds.")] = 60,
        service_name: Annotated[str | None, Query(alias="service", description="Root service of the request.")] = None,
        request_tenant: RequestTenant = None,
    ) -> StageSharesResponse:
        """Each stage's share of end-to-end latency per time bucket (of request start), for stacked charts."""
        start, end = window(start_ns, end_ns)
        if (end - start) // (bucket_s * NS_PER_S) > MAX_BUCKETS:
            raise ApiError(400, "invalid_parameter", f"bucket_s: more than {MAX_BUCKETS} buckets; use a larger one")
        where = AnalysisFilter(start, end, service=service_name, request_tenant=request_tenant)
        frame = service.stage_shares_over_time(where, bucket_s, tenant=owner)
        points = [StageSharePoint(**row) for row in frame.iter_rows(named=True)]
        return StageSharesResponse(start_ns=start, end_ns=end, bucket_s=bucket_s, points=points)

    @router.get("/hotspots", operation_id="get_hotspots", response_model=HotspotsResponse, responses=ERRORS)
    @reads.endpoint
    def hotspots(
        owner: Tenant,
        start_ns: StartNs = None,
        end_ns: EndNs = None,
        service_name: Annotated[str | None, Query(alias="service", description="Only spans of this service.")] = None,
        request_tenant: RequestTenant = None,
        limit: Annotated[int, Query(ge=1, le=1000, description="Rows per list.")] = 20,
    ) -> HotspotsResponse:
        """(service, operation) ranked by total and by p95 self time over the window's analysed spans, each with
        its share, and the longest spans flagged as hotspots (static rule, rolling p95 of their operation, or
        the SDK's `hotspan.hotspot=true`)."""
        start, end = window(start_ns, end_ns)
        where = AnalysisFilter(start, end, service=service_name, request_tenant=request_tenant)
        report = service.hotspots(where, limit, tenant=owner)
        return HotspotsResponse(
            start_ns=start,
            end_ns=end,
            by_self_time=[HotspotRank(**row) for row in report.by_self_time.iter_rows(named=True)],
            by_p95_self_time=[HotspotRank(**row) for row in report.by_p95_self_time.iter_rows(named=True)],
            flagged_spans=[FlaggedSpan(**row) for row in report.flagged.iter_rows(named=True)],
        )

    @router.get("/flamegraph", operation_id="get_flamegraph", response_model=FlameGraphResponse, responses=ERRORS)
    @reads.endpoint
    def flamegraph(
        owner: Tenant,
        start_ns: StartNs = None,
        end_ns: EndNs = None,
        service_name: Annotated[
            str | None, Query(alias="service", description="Only requests with a span of this service.")
        ] = None,
        operation: Annotated[
            str | None, Query(description="Only requests with a span of this name (and service, when given).")
        ] = None,
        request_tenant: RequestTenant = None,
    ) -> FlameGraphResponse:
        """The aggregated flame graph of the analysed requests starting in the window: one node per path of
        `service:operation` from the root, weighted by self time, as a flat list under a virtual root."""
        start, end = window(start_ns, end_ns)
        where = AnalysisFilter(start, end, service=service_name, operation=operation, request_tenant=request_tenant)
        nodes = service.flamegraph(where, tenant=owner)
        return FlameGraphResponse(start_ns=start, end_ns=end, traces=int(nodes["count"][0]), nodes=_nodes(nodes))

    return router


def _trace(read: Callable[..., _T | None], trace_id: str, owner: str | None, *args: Any) -> _T:
    """``read(trace_id, *args, tenant=owner)`` of a canonical ``trace_id`` (:data:`api.traces.TraceId`). Blocking.

    Raises:
        ApiError: 404 when ``read`` finds no such trace (returns None).
    """
    value = read(trace_id, *args, tenant=owner)
    if value is None:
        raise ApiError(404, "not_found", f"trace {trace_id} not found")
    return value


def _nodes(frame: pl.DataFrame) -> list[FlameNode]:
    return [FlameNode(**row) for row in frame.iter_rows(named=True)]


def _without(row: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in row.items() if key not in keys}


def _percentiles(row: dict[str, Any], metric: str) -> Percentiles:
    return Percentiles(
        requests=row[f"{metric}_requests"],
        p50_ns=row[f"{metric}_p50_ns"],
        p95_ns=row[f"{metric}_p95_ns"],
        p99_ns=row[f"{metric}_p99_ns"],
        mean_ns=row[f"{metric}_mean_ns"],
    )
