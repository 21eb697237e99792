"""Conversations: the requests (traces) an agent's user made in one session, each a turn, tied by the conversation
ID their spans name (``analysis.conversation``; stored per request as ``hotspan_trace_summary.ConversationId``).

Reads the pipeline's summaries (``storage.conversation_sql`` through ``AnalysisStore``), so a turn counts once the
pipeline has analysed it (quiet for ``trace_idle_s``), and prices turns with the one cost code
(:meth:`query.analysis_service.AnalysisService.trace_usage`, the configured price table). Every read takes a
keyword-only ``tenant`` (``storage.tenancy``). Times are ns since the Unix epoch, durations ns. Blocking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import polars as pl

from query.analysis_service import AnalysisService
from storage.analysis_store import AnalysisStore, ConversationFilter
from storage.conversation_sql import ConversationOrder

MAX_TURNS = 1_000
"""Most turns a conversation read returns (the earliest); a longer conversation is marked truncated."""
COST_SCAN = 5_000
"""Most conversations a cost bound or the cost sort prices, the latest first."""

MAX_PAYLOAD_TURNS = 100_000
"""Turns of one conversation whose payloads one deletion reaches (``api.payloads``)."""

ConversationSort = ConversationOrder | Literal["cost"]
"""How a list sorts, descending: a store order (``storage.conversation_sql.ConversationOrder``), or by cost."""


@dataclass(frozen=True)
class Conversation:
    """One conversation's turns.

    Attributes:
        conversation_id: the ID its spans name.
        turns: one row per turn in time order: trace_id, service, root_name (String), start_ns (Int64),
            duration_ns (UInt64), one ``<stage>_ns`` column per ``analysis.STAGES`` stage (UInt64 critical-path ns,
            summing to duration_ns), model (String), llm_calls (UInt32), input_tokens, output_tokens,
            cached_input_tokens (UInt64), errors (UInt32), sampled (Boolean: false when tail sampling dropped its
            spans), cost (Float64 in :attr:`currency`, null when it used no model or an unpriced one),
            context_growth_tokens (Int64: its input tokens less the previous turn's, the context the conversation
            added; null for the first turn).
        slowest_trace_id: the turn with the longest duration.
        currency: the price table's currency.
        truncated: the conversation has more than :data:`MAX_TURNS` turns; ``turns`` holds the earliest.
    """

    conversation_id: str
    turns: pl.DataFrame
    slowest_trace_id: str
    currency: str
    truncated: bool

    @property
    def cost(self) -> float | None:
        """The conversation's cost (:func:`total_cost` of its turns)."""
        return total_cost(self.turns)


def total_cost(turns: pl.DataFrame) -> float | None:
    """The summed ``cost`` of ``turns`` (columns llm_calls, cost); None when one turn that called a model has no
    price (a partial sum would read as the whole), or when no turn has a cost."""
    unpriced = turns.filter(pl.col("cost").is_null() & (pl.col("llm_calls") > 0)).height
    priced = turns["cost"].drop_nulls()
    return None if unpriced or not priced.len() else float(priced.sum())


class ConversationService:
    """The conversation reads (module docstring) over the pipeline's tables and the analysis service's pricing."""

    def __init__(self, store: AnalysisStore, analysis: AnalysisService) -> None:
        self._store = store
        self._analysis = analysis

    @property
    def currency(self) -> str:
        """The currency of every cost."""
        return self._analysis.currency

    def conversations(
        self,
        where: ConversationFilter,
        order: ConversationSort = "last_seen",
        limit: int = 100,
        *,
        tenant: str | None,
        min_cost: float | None = None,
        max_cost: float | None = None,
    ) -> pl.DataFrame:
        """The conversations ``where`` matches whose cost lies within ``min_cost`` .. ``max_cost`` (in
        :attr:`currency`; a bound leaves out the unpriced), at most ``limit``, sorted by ``order`` (descending; an
        unpriced conversation last by cost). A cost bound or the cost sort considers the :data:`COST_SCAN` latest
        matching conversations: costs come from the price table at read time, so the store cannot rank by them.

        Returns:
            conversation_id, service (String, its first turn's root service), turns (UInt64), first_start_ns,
            last_start_ns (Int64, its first and latest turn's start), duration_ns (UInt64, summed turn durations),
            llm_calls, input_tokens, output_tokens, cached_input_tokens, errors (UInt64), cost (Float64,
            :func:`total_cost` of its turns).
        """
        if order != "cost" and min_cost is None and max_cost is None:
            return self._priced(self._store.conversations(where, order, limit, tenant=tenant), tenant=tenant)
        rows = self._priced(self._store.conversations(where, "last_seen", COST_SCAN, tenant=tenant), tenant=tenant)
        if min_cost is not None:
            rows = rows.filter(pl.col("cost") >= min_cost)
        if max_cost is not None:
            rows = rows.filter(pl.col("cost") <= max_cost)
        if order == "cost":
            rows = rows.sort("cost", descending=True, nulls_last=True, maintain_order=True)
        return rows.head(limit)

    def _priced(self, rows: pl.DataFrame, *, tenant: str | None) -> pl.DataFrame:
        """Store rows (``AnalysisStore.conversations``) with each conversation's cost in place of its trace IDs."""
        turns = rows.select("conversation_id", pl.col("trace_ids").alias("trace_id")).explode("trace_id")
        costs = self._turn_costs(turns["trace_id"].to_list(), tenant=tenant)
        priced = turns.join(costs, on="trace_id", how="left")
        per_conversation = {
            str(conversation): total_cost(group)
            for (conversation,), group in priced.group_by("conversation_id", maintain_order=True)
        }
        cost = pl.Series("cost", [per_conversation.get(c) for c in rows["conversation_id"]], dtype=pl.Float64)
        return rows.drop("trace_ids").with_columns(cost)

    def conversation(self, conversation_id: str, *, tenant: str | None) -> Conversation | None:
        """The conversation's turns with their stages, tokens and cost (:class:`Conversation`); None when the
        tenant has no analysed turn naming ``conversation_id``."""
        turns = self._store.conversation_turns(conversation_id, MAX_TURNS + 1, tenant=tenant)
        if not turns.height:
            return None
        truncated = turns.height > MAX_TURNS
        turns = turns.head(MAX_TURNS)
        costs = self._turn_costs(turns["trace_id"].to_list(), tenant=tenant)
        turns = turns.join(costs.drop("llm_calls"), on="trace_id", how="left", maintain_order="left").with_columns(
            pl.col("input_tokens").cast(pl.Int64).diff().alias("context_growth_tokens")
        )
        slowest = turns.row(int(turns["duration_ns"].arg_max() or 0), named=True)["trace_id"]
        return Conversation(conversation_id, turns, slowest, self.currency, truncated)

    def trace_ids(self, conversation_id: str, *, tenant: str | None) -> list[str]:
        """The trace IDs of the conversation's analysed turns (at most :data:`MAX_PAYLOAD_TURNS`), in time order;
        empty for an unknown ID."""
        turns = self._store.conversation_turns(conversation_id, MAX_PAYLOAD_TURNS, tenant=tenant)
        return turns["trace_id"].to_list()

    def _turn_costs(self, trace_ids: list[str], *, tenant: str | None) -> pl.DataFrame:
        """trace_id, llm_calls, cost of each analysed turn among ``trace_ids`` (the analysis service's pricing)."""
        return self._analysis.trace_usage(trace_ids, tenant=tenant).select("trace_id", "llm_calls", "cost")
