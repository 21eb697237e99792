"""``GET /api/v1/capacity``: the capacity health score (:mod:`diagnosis.capacity`) per vLLM engine and per serving
service, with its parts and the inputs they were computed from.

Thin: parse, ask the query room (:class:`query.capacity.CapacityService`, the same scores ``/metrics`` exports),
shape the answer. Engine metrics are infrastructure-wide, not split by tenant (as on the Services page). Without
``HOTSPAN_PROMETHEUS_URL``, or when Prometheus fails, the answer is still 200: its ``status`` says which and
``message`` why, so a dashboard shows the reason instead of an error.
"""

from __future__ import annotations

import time
from dataclasses import asdict

from fastapi import APIRouter
from pydantic import BaseModel, Field

from api.models import ErrorResponse
from api.read_pool import READ_ERRORS, ReadPool
from api.window import EndNs
from diagnosis.capacity import CapacityScore
from query.capacity import CapacityService, CapacityStatus


class CapacityParts(BaseModel):
    kv_cache: float | None = Field(None, description="KV-cache headroom 0..1: `1 - usage / kv_saturation`.")
    queue: float | None = Field(None, description="Queue headroom 0..1: `1 - waiting / max(running, 1)`.")
    ttft: float | None = Field(None, description="TTFT headroom 0..1: `1 - ttft_p95_seconds / ttft_slo_s`.")
    rate: float | None = Field(
        None, description="Rate headroom 0..1: `1 - request_rate_per_s / max_rate_per_s`; null without a sized rate."
    )


class CapacityInputs(BaseModel):
    kv_cache_usage: float | None = Field(description="Mean KV-cache usage, fraction 0..1 (the fullest engine's).")
    requests_waiting: float | None = Field(description="Mean requests waiting, requests.")
    requests_running: float | None = Field(description="Mean requests running, requests.")
    request_rate_per_s: float | None = Field(description="Finished requests per second over the window.")
    ttft_p95_seconds: float | None = Field(description="p95 time to first token over the window, seconds.")


class CapacityEntry(BaseModel):
    name: str = Field(description="The engine (`instance/engine/model_name`, the labels it has) or the service.")
    service: str = Field(description="The scrape `job` the engine belongs to (the service's own name for a service).")
    score: float | None = Field(description="0..100 (100: plenty of room); null when no part could be computed.")
    weakest_part: str | None = Field(description="The part with the least headroom: what limits the score.")
    parts: CapacityParts = Field(description="Each headroom, 0..1 (1: plenty, 0: exhausted); null when absent.")
    inputs: CapacityInputs = Field(description="What the parts were computed from; null where no series was read.")


class CapacitySettingsOut(BaseModel):
    ttft_slo_s: float = Field(description="The p95 TTFT objective, seconds.")
    kv_saturation: float = Field(description="KV-cache usage (0..1) counted as full.")
    max_rate_per_s: float | None = Field(description="Requests per second one engine is sized for; null: not scored.")
    window_s: float = Field(description="How far back the inputs are read, seconds.")
    weights: dict[str, float] = Field(description="Part name -> relative weight in the geometric mean.")


class CapacityResponse(BaseModel):
    status: CapacityStatus = Field(
        description="`ok`: read (possibly no engine); `not_configured`: no HOTSPAN_PROMETHEUS_URL; "
        "`unavailable`: Prometheus could not be queried."
    )
    message: str = Field(description="Why there are no scores, for people; empty when `status` is `ok`.")
    start_ns: int = Field(description="Window start, ns since the Unix epoch (`end_ns` minus `settings.window_s`).")
    end_ns: int = Field(description="Window end, ns since the Unix epoch.")
    settings: CapacitySettingsOut
    engines: list[CapacityEntry] = Field(description="One per vLLM engine, by name.")
    services: list[CapacityEntry] = Field(description="One per service (scrape job), pooling its engines, by name.")


def build_router(capacity: CapacityService, reads: ReadPool | None = None) -> APIRouter:
    """``GET /api/v1/capacity`` over ``capacity``, run whole on ``reads`` (:mod:`api.read_pool`; a pool of its own
    when omitted): Prometheus is read off the event loop."""
    router = APIRouter(prefix="/api/v1", tags=["engines"], responses=READ_ERRORS)
    reads = reads or ReadPool()

    @router.get(
        "/capacity",
        operation_id="get_capacity",
        response_model=CapacityResponse,
        responses={400: {"model": ErrorResponse}},
    )
    @reads.endpoint
    def get_capacity(end_ns: EndNs = None) -> CapacityResponse:
        """The capacity health score, 0-100, of every vLLM engine and serving service over the
        `HOTSPAN_CAPACITY_WINDOW_S` before `end_ns`: a weighted geometric mean of the headrooms of KV cache, queue,
        TTFT against its SLO and (when sized) request rate, read from the Prometheus at `HOTSPAN_PROMETHEUS_URL`.
        Always 200 when the parameters are valid: `status` tells a missing or failing Prometheus."""
        end = end_ns if end_ns is not None else time.time_ns()
        report = capacity.report(end)
        return CapacityResponse(
            status=report.status,
            message=report.message,
            start_ns=report.start_ns,
            end_ns=report.end_ns,
            settings=CapacitySettingsOut(**asdict(report.settings)),
            engines=[_entry(score) for score in report.of_scope("engine")],
            services=[_entry(score) for score in report.of_scope("service")],
        )

    return router


def _entry(score: CapacityScore) -> CapacityEntry:
    return CapacityEntry(
        name=score.name,
        service=score.service,
        score=score.score,
        weakest_part=score.weakest_part,
        parts=CapacityParts(**score.parts),
        inputs=CapacityInputs(**asdict(score.inputs)),
    )
