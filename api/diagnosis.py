"""``/api/v1/diagnosis``: named causes of latency over a window, with evidence and a remedy.

Thin: parse, call :func:`diagnosis.diagnose_window`, shape the answer. Reads are limited to the caller's tenant
(:mod:`api.tenancy`); engine metrics, when configured (``HOTSPAN_PROMETHEUS_URL``), are infrastructure-wide.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from api.errors import ApiError
from api.models import ErrorResponse
from api.tenancy import Tenant
from diagnosis import Diagnoser, DiagnosisSettings, Finding, diagnose_window, load_diagnosis_settings
from diagnosis.engine import DEFAULT_TRACE_LIMIT
from storage.reader import TraceReader

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


def build_router(reader: TraceReader, settings: DiagnosisSettings | None = None) -> APIRouter:
    """The diagnosis route over ``reader``.

    Args:
        reader: the trace store.
        settings: rule table and metrics source; default :func:`diagnosis.load_diagnosis_settings` (from the
            environment).

    Raises:
        diagnosis.RuleTableError: the configured rule table is invalid.
    """
    settings = settings or load_diagnosis_settings()
    diagnoser = Diagnoser(settings.rules)
    router = APIRouter(prefix="/api/v1", tags=["diagnosis"])

    @router.get(
        "/diagnosis",
        operation_id="diagnose",
        response_model=DiagnosisResponse,
        responses={400: {"model": ErrorResponse}},
    )
    async def diagnose(
        tenant: Tenant,
        start_ns: Annotated[
            int | None, Query(ge=0, description="Window start (span start), ns since the Unix epoch; open if absent.")
        ] = None,
        end_ns: Annotated[
            int | None, Query(ge=0, description="Window end (span start), ns since the Unix epoch; open if absent.")
        ] = None,
        service: Annotated[
            str | None, Query(description="Only traces with a span of this service (whole traces are analysed).")
        ] = None,
        limit: Annotated[
            int, Query(ge=1, le=MAX_TRACES, description="Most traces analysed, the most recently active first.")
        ] = DEFAULT_TRACE_LIMIT,
    ) -> DiagnosisResponse:
        """Diagnose the traces of a window: queue saturation, unused prefix cache, tokenizer cold starts,
        per-request connections, decode-bound generation, orchestration CPU hotspots, redundant LLM calls,
        retrieval top-K blow-up and event-loop blocking. Evidence keys carry their units."""
        if start_ns is not None and end_ns is not None and end_ns < start_ns:
            raise ApiError(400, "invalid_parameter", f"end_ns ({end_ns}) is before start_ns ({start_ns})")
        report = await run_in_threadpool(
            diagnose_window,
            reader,
            tenant=tenant,
            start_ns=start_ns,
            end_ns=end_ns,
            service=service or None,
            limit=limit,
            diagnoser=diagnoser,
            metrics_source=settings.metrics,
        )
        return DiagnosisResponse(
            findings=report.findings,
            trace_count=report.trace_count,
            metrics=report.metrics,
            rule_errors=[RuleErrorOut(cause=e.cause, message=e.message) for e in report.errors],
        )

    return router
