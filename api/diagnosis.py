"""``/api/v1/diagnosis``: named causes of latency over a window, with evidence and a remedy.

Thin: parse, call the query room's :class:`query.diagnosis.DiagnosisService` (the same rules, stage table and
engine metrics as the Diagnosis page and the SLO alerts), shape the answer. Reads are limited to the caller's
tenant (:mod:`api.tenancy`); engine metrics, when configured (``HOTSPAN_PROMETHEUS_URL``), are
infrastructure-wide.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from api.models import ErrorResponse
from api.read_pool import READ_ERRORS, ReadPool
from api.tenancy import Tenant
from api.window import MAX_NS, check_order
from diagnosis import DiagnosisReport, Finding
from diagnosis.engine import DEFAULT_TRACE_LIMIT
from query.diagnosis import DiagnosisService

MAX_TRACES = 10_000


class RuleErrorOut(BaseModel):
    cause: str = Field(description="The rule that failed.")
    message: str


class DiagnosisResponse(BaseModel):
    findings: list[Finding] = Field(description="Ordered by severity (critical first), then confidence.")
    trace_count: int = Field(description="Requests (traces) analysed.")
    metrics: str = Field(
        description="Engine metrics used: `none` (no HOTSPAN_PROMETHEUS_URL), `prometheus`, or "
        "`unavailable: <reason>` (the diagnosis then rests on traces alone)."
    )
    rule_errors: list[RuleErrorOut] = Field(description="Rules that failed on this window; the others still ran.")

    @classmethod
    def of(cls, report: DiagnosisReport) -> DiagnosisResponse:
        """The answer for ``report`` (the REST route's and the MCP ``diagnose`` tool's)."""
        return cls(
            findings=report.findings,
            trace_count=report.trace_count,
            metrics=report.metrics,
            rule_errors=[RuleErrorOut(cause=e.cause, message=e.message) for e in report.errors],
        )


def build_router(service_: DiagnosisService, reads: ReadPool | None = None) -> APIRouter:
    """The diagnosis route over ``service_`` (the query room's), run whole on ``reads`` (:mod:`api.read_pool`; a pool
    of its own when omitted), never on the event loop."""
    router = APIRouter(prefix="/api/v1", tags=["diagnosis"], responses=READ_ERRORS)
    reads = reads or ReadPool()

    @router.get(
        "/diagnosis",
        operation_id="diagnose",
        response_model=DiagnosisResponse,
        responses={400: {"model": ErrorResponse}},
    )
    @reads.endpoint
    def diagnose(
        tenant: Tenant,
        start_ns: Annotated[
            int | None,
            Query(ge=0, le=MAX_NS, description="Window start (span start), ns since the Unix epoch; open if absent."),
        ] = None,
        end_ns: Annotated[
            int | None,
            Query(ge=0, le=MAX_NS, description="Window end (span start), ns since the Unix epoch; open if absent."),
        ] = None,
        service: Annotated[
            str | None, Query(description="Only traces with a span of this service (whole traces are analysed).")
        ] = None,
        operation: Annotated[
            str | None, Query(description="Only traces with a span of this name (of `service` when both are given).")
        ] = None,
        limit: Annotated[
            int, Query(ge=1, le=MAX_TRACES, description="Most traces analysed, the most recently active first.")
        ] = DEFAULT_TRACE_LIMIT,
    ) -> DiagnosisResponse:
        """Diagnose the traces of a window: queue saturation, unused prefix cache, tokenizer cold starts,
        per-request connections, decode-bound generation, orchestration CPU hotspots, redundant LLM calls,
        retrieval top-K blow-up and event-loop blocking. Evidence keys carry their units."""
        check_order(start_ns, end_ns)
        report = service_.diagnose(
            tenant=tenant,
            start_ns=start_ns,
            end_ns=end_ns,
            service=service or None,
            operation=operation or None,
            limit=limit,
        )
        return DiagnosisResponse.of(report)

    return router
