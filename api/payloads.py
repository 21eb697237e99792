"""Deleting stored message payloads on request (``DELETE /api/v1/payloads/...``): the prompts, completions and tool
arguments a user must have forgotten, removed from a trace's spans while its timings, tokens and stages stay
(``storage.payloads``). The routes need the ``admin`` role (``hotspan.auth.policy``); a delete covers the caller's
tenancy, as a read does (an admin token's: every tenant)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from api.conversations import MAX_ID_CHARS
from api.errors import ApiError
from api.models import ErrorResponse
from api.read_pool import READ_ERRORS, ReadPool
from api.tenancy import Tenant
from api.traces import TraceId
from query.service import QueryService
from query.store import PayloadStore


class PayloadsDeleted(BaseModel):
    """What a payload deletion did."""

    trace_ids: list[str] = Field(description="The traces whose spans were searched for payloads.")
    spans: int = Field(description="Stored span rows whose payloads were deleted (0: none held one).")


def build_router(payloads: PayloadStore, query: QueryService, reads: ReadPool | None = None) -> APIRouter:
    """The payload deletion routes over ``payloads``; ``query`` names a trace's or a conversation's traces (404
    when the caller's tenancy holds none). Each deletion runs on ``reads`` (:mod:`api.read_pool`), never on the
    event loop, and returns once every replica applied it."""
    router = APIRouter(prefix="/api/v1/payloads", tags=["payloads"], responses=READ_ERRORS)
    reads = reads or ReadPool()

    @router.delete(
        "/traces/{trace_id}",
        operation_id="delete_trace_payloads",
        response_model=PayloadsDeleted,
        responses={400: {"model": ErrorResponse}, 404: {"model": ErrorResponse}},
    )
    async def delete_trace_payloads(trace_id: TraceId, tenant: Tenant) -> PayloadsDeleted:
        """Delete the message payloads of one trace: the attributes the redaction table names (GenAI
        ``gen_ai.input.messages`` ..., OpenInference ``llm.input_messages.*`` ...) and the attributes of the message
        events it names; each changed span gets ``hotspan.payload_deleted=true``. Deleting again deletes nothing."""
        if not await reads.run(query.trace_size, trace_id, tenant=tenant):
            raise ApiError(404, "not_found", f"trace {trace_id} not found")
        spans = await reads.run(payloads.delete_payloads, [trace_id], tenant=tenant)
        return PayloadsDeleted(trace_ids=[trace_id], spans=spans)

    @router.delete(
        "/conversations/{conversation_id}",
        operation_id="delete_conversation_payloads",
        response_model=PayloadsDeleted,
        responses={404: {"model": ErrorResponse}},
    )
    async def delete_conversation_payloads(
        conversation_id: Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS)], tenant: Tenant
    ) -> PayloadsDeleted:
        """Delete the message payloads of every turn of a conversation the trace pipeline has analysed (as for
        one trace); a turn still waiting for its analysis is not reached yet."""
        trace_ids = await reads.run(query.conversations.trace_ids, conversation_id, tenant=tenant)
        if not trace_ids:
            raise ApiError(404, "not_found", f"conversation {conversation_id} not found")
        spans = await reads.run(payloads.delete_payloads, trace_ids, tenant=tenant)
        return PayloadsDeleted(trace_ids=trace_ids, spans=spans)

    return router
