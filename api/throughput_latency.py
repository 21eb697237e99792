"""``GET /api/v1/throughput-latency``: per vLLM engine configuration and time bucket, achieved throughput against
latency, with the Pareto frontier marked.

Thin: parse, call the query room (:meth:`query.service.QueryService.throughput_latency`), shape the answer. Every
read is limited to the caller's tenant (:mod:`api.tenancy`). Units are in the field names: ``_ns`` nanoseconds
(times since the Unix epoch), ``_ms`` milliseconds, ``_s`` seconds, ``_per_s`` per second.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from api.errors import ApiError
from api.models import ErrorResponse
from api.read_pool import READ_ERRORS, ReadPool
from api.tenancy import Tenant
from api.window import EndNs, StartNs, window
from query.service import QueryService
from query.store import EngineWindow
from query.throughput_latency import CONFIG_KEYS, Latency, Throughput
from units import NS_PER_S

MAX_BUCKETS = 2_000
"""Most buckets in a window; a longer window needs a larger ``bucket_s``."""
MAX_BUCKET_S = 366 * 86_400
"""Widest bucket, s (a year)."""


class ThroughputLatencyPoint(BaseModel):
    service_name: str = Field(description="The engine's `service.name`.")
    model: str = Field(description="`vllm.config.model` resource attribute, else the span's model; may be empty.")
    config: dict[str, str] = Field(
        description="The engine flags its spans' resource attributes report (`vllm.config.<name>`): "
        f"{', '.join(CONFIG_KEYS)}; absent ones are left out."
    )
    label: str = Field(description="Model and configuration in words.")
    bucket_start_ns: int
    requests: int = Field(description="`llm_request` spans starting in the bucket.")
    output_tokens: int
    active_s: float = Field(description="First arrival to last finish of those requests, s: the throughput's time.")
    requests_per_s: float
    output_tokens_per_s: float
    e2e_p50_ms: float
    e2e_p95_ms: float
    ttft_p50_ms: float | None = Field(description="Null when no span reports its time to first token.")
    ttft_p95_ms: float | None
    on_frontier: bool = Field(description="No other point has higher-or-equal throughput and lower-or-equal latency.")
    example_trace_ids: list[str] = Field(description="A few traces of the bucket, slowest request first.")


class ThroughputLatencyResponse(BaseModel):
    start_ns: int
    end_ns: int
    bucket_s: int
    throughput: str = Field(description="The frontier's throughput objective (maximised).")
    latency: str = Field(description="The frontier's latency objective (minimised).")
    points: list[ThroughputLatencyPoint]


def build_router(query: QueryService, reads: ReadPool | None = None) -> APIRouter:
    """``GET /api/v1/throughput-latency`` over ``query``, run whole on ``reads`` (:mod:`api.read_pool`; a pool of its
    own when omitted), never on the event loop."""
    router = APIRouter(prefix="/api/v1", tags=["engines"], responses=READ_ERRORS)
    reads = reads or ReadPool()

    @router.get(
        "/throughput-latency",
        operation_id="get_throughput_latency",
        response_model=ThroughputLatencyResponse,
        responses={400: {"model": ErrorResponse}},
    )
    @reads.endpoint
    def throughput_latency(
        tenant: Tenant,
        start_ns: StartNs = None,
        end_ns: EndNs = None,
        bucket_s: Annotated[
            int, Query(ge=1, le=MAX_BUCKET_S, description="Bucket width, s; buckets start at `start_ns`.")
        ] = 300,
        model: Annotated[str | None, Query(description="Only this model (exact).")] = None,
        throughput: Annotated[Throughput, Query(description="Frontier throughput objective.")] = "requests_per_s",
        latency: Annotated[Latency, Query(description="Frontier latency objective.")] = "e2e_p95_ms",
    ) -> ThroughputLatencyResponse:
        """Per vLLM engine configuration (the engine's `vllm.config.*` resource attributes and model) and bucket:
        requests and output tokens per second over the time the configuration served (first arrival to last
        finish in the bucket), against p50/p95 end-to-end latency and TTFT of vLLM's `llm_request` spans; points
        on the Pareto frontier of (`throughput` up, `latency` down) over the whole window are marked."""
        start, end = window(start_ns, end_ns)
        if (end - start) // (bucket_s * NS_PER_S) > MAX_BUCKETS:
            raise ApiError(400, "invalid_parameter", f"bucket_s: more than {MAX_BUCKETS} buckets; use a larger one")
        where = EngineWindow(start, end, bucket_s * NS_PER_S, model=model or None)
        view = query.throughput_latency(where, throughput=throughput, latency=latency, tenant=tenant)
        points = []
        for row in view.points.iter_rows(named=True):
            config = {key: value for key in CONFIG_KEYS if (value := row.pop(key))}
            points.append(ThroughputLatencyPoint(config=config, **row))
        return ThroughputLatencyResponse(
            start_ns=start, end_ns=end, bucket_s=bucket_s, throughput=throughput, latency=latency, points=points
        )

    return router
