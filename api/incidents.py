"""``/api/v1/incidents``: what the incident lifecycle (:mod:`incidents.lifecycle`) opened: a series that left its
robust baseline, the window, baseline against observed, the diagnosis of the window against the baseline window, the
topology neighbours and example traces.

Thin: parse, call the query room (:meth:`query.service.QueryService.incidents`, the Incidents page's read too),
shape the answer. Reads are limited to the caller's tenant
(:mod:`api.tenancy`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field

from api.errors import ApiError
from api.models import ErrorResponse
from api.read_pool import READ_ERRORS, ReadPool
from api.tenancy import Tenant
from api.window import MAX_NS, check_order
from query.service import QueryService
from query.store import Incident, IncidentQuery

MAX_INCIDENTS = 1_000


class SeriesOut(BaseModel):
    kind: Literal["operation", "stage", "finding"] = Field(
        description="`operation` (RED rollup), `stage` (request summaries) or `finding` (a diagnosis cause new in "
        "the window's findings of a root service)."
    )
    service: str = Field(description="The service (the root service for a stage).")
    name: str = Field(description="The operation (span name) or the stage.")
    span_kind: str = Field(description="The operation's span kind; empty for a stage or a finding.")
    metric: str = Field(
        description="`p95_ms` (ms), `error_rate` (0..1), `throughput_per_min` (calls per minute) or `severity` (a "
        "finding's: 0 none, 1 info, 2 warning, 3 critical)."
    )
    observed: float = Field(description="The window's value, in the metric's unit.")
    baseline: float = Field(description="The baseline median, in the metric's unit.")
    baseline_scale: float = Field(description="The baseline's robust sigma (1.4826 x MAD, floored), same unit.")
    score: float = Field(description="Robust z-score of the observed value; positive is worse.")
    calls: int = Field(description="Calls (or requests, for a stage) in the window.")
    seasonal: bool = Field(description="Whether the baseline is the same time one day earlier (else trailing).")


class IncidentFinding(BaseModel):
    cause: str
    title: str
    severity: str
    confidence: float
    remedy: str
    new: bool = Field(
        description="The baseline window did not show this cause at this severity or worse, or showed it at this "
        "severity with a share of latency at least 10 points lower."
    )
    baseline_title: str | None = Field(
        default=None, description="The baseline window's finding of this cause, when it had one (before and after)."
    )


class IncidentOut(BaseModel):
    incident_id: str
    status: Literal["open", "resolved"]
    window_start_ns: int = Field(description="Start of the window that opened it, ns since the Unix epoch.")
    window_end_ns: int = Field(description="End (exclusive) of that window, ns.")
    baseline_start_ns: int
    baseline_end_ns: int
    seasonal: bool
    kind: Literal["operation", "stage", "finding"] = Field(description="Of the primary series (the largest score).")
    service: str
    name: str
    span_kind: str
    metric: str
    baseline_value: float = Field(description="The primary series' baseline median, in its metric's unit.")
    observed_value: float = Field(description="The primary series' value in the window, same unit.")
    score: float
    services: list[str] = Field(description="Every service with a deviating series in the incident.")
    series: list[SeriesOut]
    findings: list[IncidentFinding] = Field(description="Diagnosis of the window, new causes first.")
    neighbours: list[str] = Field(description="Nodes connected to the service in the window's service graph.")
    example_trace_ids: list[str] = Field(description="Slowest or failed traces of the primary series in the window.")
    last_deviation_end_ns: int
    resolved_at_ns: int | None = Field(description="When its series were back within their baselines; null if open.")


class IncidentsResponse(BaseModel):
    incidents: list[IncidentOut] = Field(description="Newest opening first.")


def incident_out(incident: Incident) -> IncidentOut:
    """The API shape of a stored incident."""
    fields: dict[str, Any] = {name: getattr(incident, name) for name in IncidentOut.model_fields}
    return IncidentOut(**fields)


def build_router(query: QueryService, reads: ReadPool | None = None) -> APIRouter:
    """The incident routes over the query room ``query``; each runs whole on ``reads`` (:mod:`api.read_pool`;
    a pool of its own when omitted), never on the event loop."""
    router = APIRouter(prefix="/api/v1", tags=["incidents"], responses=READ_ERRORS)
    reads = reads or ReadPool()

    @router.get(
        "/incidents",
        operation_id="listIncidents",
        response_model=IncidentsResponse,
        responses={400: {"model": ErrorResponse}},
    )
    @reads.endpoint
    def list_incidents(
        tenant: Tenant,
        start_ns: Annotated[
            int | None, Query(ge=0, le=MAX_NS, description="Keep incidents open at or after this time, ns.")
        ] = None,
        end_ns: Annotated[
            int | None, Query(ge=0, le=MAX_NS, description="Keep incidents opened at or before this time, ns.")
        ] = None,
        service: Annotated[str | None, Query(description="Keep incidents where this service deviated.")] = None,
        metric: Annotated[
            Literal["p95_ms", "error_rate", "throughput_per_min"] | None,
            Query(description="The primary series' metric."),
        ] = None,
        status: Annotated[Literal["open", "resolved"] | None, Query(description="Open or resolved only.")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_INCIDENTS, description="Most incidents returned.")] = 100,
    ) -> IncidentsResponse:
        """Incidents the anomaly detector opened, newest first: each a series (an operation's p95 latency, error
        rate or throughput, or a stage's p95) that left its robust baseline, with its diagnosis."""
        check_order(start_ns, end_ns)
        selection = IncidentQuery(
            start_ns=start_ns, end_ns=end_ns, service=service or None, metric=metric, status=status, limit=limit
        )
        found = query.incidents(selection, tenant=tenant)
        return IncidentsResponse(incidents=[incident_out(i) for i in found])

    @router.get(
        "/incidents/{incident_id}",
        operation_id="getIncident",
        response_model=IncidentOut,
        responses={404: {"model": ErrorResponse}},
    )
    @reads.endpoint
    def get_incident(
        tenant: Tenant,
        incident_id: Annotated[str, Path(pattern=r"^[0-9a-f]{32}$", description="The incident's 32-hex ID.")],
    ) -> IncidentOut:
        """One incident at its newest version."""
        found = query.incidents(IncidentQuery(incident_id=incident_id, limit=1), tenant=tenant)
        if not found:
            raise ApiError(404, "not_found", f"incident {incident_id} not found")
        return incident_out(found[0])

    return router
