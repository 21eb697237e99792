"""``/api/v1/conversations`` routes: the conversations analysed requests are turns of (the conversation ID their
spans name: ``gen_ai.conversation.id``, ``session.id``, ``langfuse.session.id``), and one conversation's turns.

Thin: parse, call :class:`query.conversations.ConversationService`, shape the answer. They read the pipeline's
summaries, so a turn shows once its trace is quiet for ``trace_idle_s``. Every read is limited to the caller's
tenant (:mod:`api.tenancy`). Units are in every field name: ``_ns`` nanoseconds (times since the Unix epoch),
``_tokens`` tokens; costs are in the response's ``currency``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field

from analysis import STAGES
from api.errors import ApiError
from api.models import ErrorResponse
from api.read_pool import READ_ERRORS, ReadPool
from api.tenancy import Tenant
from api.window import MAX_NS, check_order
from query.conversations import ConversationService, ConversationSort
from query.store import ConversationFilter

MAX_CONVERSATIONS = 1_000
"""Most conversations one list answers."""
MAX_ID_CHARS = 512
"""Longest conversation ID or search text a route takes."""

ERRORS: dict[int | str, dict[str, Any]] = {400: {"model": ErrorResponse}}
DETAIL_ERRORS: dict[int | str, dict[str, Any]] = {400: {"model": ErrorResponse}, 404: {"model": ErrorResponse}}


class ConversationRow(BaseModel):
    conversation_id: str
    service: str = Field(description="Root service of its first turn.")
    turns: int = Field(description="Analysed requests (traces) naming the conversation.")
    first_start_ns: int = Field(description="Start of its first turn, ns since the Unix epoch.")
    last_start_ns: int = Field(description="Start of its latest turn, ns since the Unix epoch.")
    duration_ns: int = Field(description="Summed turn durations (the time its user waited), ns.")
    llm_calls: int
    input_tokens: int = Field(description="Input tokens over its turns (cached included).")
    output_tokens: int
    cached_input_tokens: int
    errors: int = Field(description="Error spans over its turns.")
    cost: float | None = Field(description="Summed turn costs; null when a turn used an unpriced model, or none.")


class ConversationsResponse(BaseModel):
    currency: str
    conversations: list[ConversationRow]


class Turn(BaseModel):
    trace_id: str
    service: str = Field(description="Root service of the request.")
    root_name: str = Field(description="Root span name of the request.")
    start_ns: int = Field(description="Request start, ns since the Unix epoch.")
    duration_ns: int = Field(description="Request end-to-end latency, ns.")
    stages_ns: dict[str, int] = Field(description="Critical-path ns per stage (every stage); sums to duration_ns.")
    model: str
    llm_calls: int
    input_tokens: int = Field(description="Input tokens of the turn's model calls (cached included).")
    output_tokens: int
    cached_input_tokens: int
    context_growth_tokens: int | None = Field(
        description="Input tokens less the previous turn's: the context the conversation added; null first."
    )
    errors: int
    sampled: bool = Field(description="False when tail sampling dropped the turn's spans (its trace cannot open).")
    cost: float | None = Field(description="Null when the turn used no model or an unpriced one.")


class ConversationResponse(BaseModel):
    conversation: ConversationRow = Field(description="Its totals over the turns listed, as the list shows them.")
    currency: str
    turns: list[Turn] = Field(description="In time order.")
    slowest_trace_id: str = Field(description="The turn with the longest duration.")
    truncated: bool = Field(description="More turns than one answer holds; the earliest are listed (and summed).")


def build_router(service: ConversationService, reads: ReadPool | None = None) -> APIRouter:
    """The conversation routes over ``service``; each runs whole on ``reads`` (:mod:`api.read_pool`; a pool of its
    own when omitted), never on the event loop."""
    router = APIRouter(prefix="/api/v1", tags=["conversations"], responses=READ_ERRORS)
    reads = reads or ReadPool()

    @router.get(
        "/conversations", operation_id="list_conversations", response_model=ConversationsResponse, responses=ERRORS
    )
    @reads.endpoint
    def conversations(
        owner: Tenant,
        q: Annotated[str | None, Query(max_length=MAX_ID_CHARS, description="Text the ID contains.")] = None,
        service_name: Annotated[str | None, Query(alias="service", description="Root service of a turn.")] = None,
        start_ns: Annotated[
            int | None, Query(ge=0, le=MAX_NS, description="A turn starts at or after this, ns since the Unix epoch.")
        ] = None,
        end_ns: Annotated[
            int | None, Query(ge=0, le=MAX_NS, description="A turn starts at or before this, ns since the Unix epoch.")
        ] = None,
        min_duration_ns: Annotated[
            int | None, Query(ge=0, le=MAX_NS, description="Summed turn durations at least this, ns.")
        ] = None,
        max_duration_ns: Annotated[
            int | None, Query(ge=0, le=MAX_NS, description="Summed turn durations at most this, ns.")
        ] = None,
        min_cost: Annotated[float | None, Query(ge=0, description="Cost at least this, in `currency`.")] = None,
        max_cost: Annotated[float | None, Query(ge=0, description="Cost at most this, in `currency`.")] = None,
        sort: Annotated[
            ConversationSort,
            Query(description="Sort key, descending; a cost bound or `cost` ranks the 5,000 latest conversations."),
        ] = "last_seen",
        limit: Annotated[int, Query(ge=1, le=MAX_CONVERSATIONS)] = 100,
    ) -> ConversationsResponse:
        """Conversations with an analysed turn matching the filters, each with all its turns' totals and cost
        (the price table, `HOTSPAN_PRICES`)."""
        check_order(start_ns, end_ns)
        _check_bounds("min_duration_ns", min_duration_ns, "max_duration_ns", max_duration_ns)
        _check_bounds("min_cost", min_cost, "max_cost", max_cost)
        where = ConversationFilter(start_ns, end_ns, q or None, service_name, min_duration_ns, max_duration_ns)
        frame = service.conversations(where, sort, limit, tenant=owner, min_cost=min_cost, max_cost=max_cost)
        rows = [ConversationRow(**row) for row in frame.iter_rows(named=True)]
        return ConversationsResponse(currency=service.currency, conversations=rows)

    @router.get(
        "/conversations/{conversation_id}",
        operation_id="get_conversation",
        response_model=ConversationResponse,
        responses=DETAIL_ERRORS,
    )
    @reads.endpoint
    def conversation(
        conversation_id: Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS)], owner: Tenant
    ) -> ConversationResponse:
        """One conversation's analysed turns in time order: each turn's stage split, tokens, context growth and
        cost, and the slowest turn."""
        found = service.conversation(conversation_id, tenant=owner)
        if found is None:
            raise ApiError(404, "not_found", f"conversation {conversation_id} not found")
        turns = [_turn(row) for row in found.turns.iter_rows(named=True)]
        totals = ConversationRow(
            conversation_id=conversation_id,
            service=turns[0].service,
            turns=len(turns),
            first_start_ns=turns[0].start_ns,
            last_start_ns=turns[-1].start_ns,
            duration_ns=sum(t.duration_ns for t in turns),
            llm_calls=sum(t.llm_calls for t in turns),
            input_tokens=sum(t.input_tokens for t in turns),
            output_tokens=sum(t.output_tokens for t in turns),
            cached_input_tokens=sum(t.cached_input_tokens for t in turns),
            errors=sum(t.errors for t in turns),
            cost=found.cost,
        )
        return ConversationResponse(
            conversation=totals,
            turns=turns,
            currency=found.currency,
            slowest_trace_id=found.slowest_trace_id,
            truncated=found.truncated,
        )

    return router


def _check_bounds(low_name: str, low: float | None, high_name: str, high: float | None) -> None:
    """Raise ApiError 400 when both bounds of a range are given and ``low`` is above ``high``."""
    if low is not None and high is not None and low > high:
        raise ApiError(400, "invalid_parameter", f"{low_name}: {low} is above {high_name} {high}")


def _turn(row: dict[str, Any]) -> Turn:
    """A turn of :attr:`query.conversations.Conversation.turns`, its stage columns folded into ``stages_ns``."""
    stages = {stage: int(row.pop(f"{stage}_ns")) for stage in STAGES}
    return Turn(**row, stages_ns=stages)
