"""SQL of the conversation reads, on ``hotspan_trace_summary`` (its ``ConversationId``, migration 0090): a
conversation is the analysed requests (turns) naming one ID. Bound parameters only; every statement carries the
owner-tenant condition (:data:`storage.analysis_sql.OWNER_FILTER`, parameters from
:func:`storage.tenancy.tenant_parameters`). Times are ns since the Unix epoch, durations ns.
"""

from __future__ import annotations

from typing import Literal

from storage.analysis_sql import OWNER_FILTER

ConversationOrder = Literal["last_seen", "first_seen", "duration", "turns", "input_tokens"]
"""How :data:`CONVERSATIONS` sorts, always descending: the latest turn's start, the first turn's start, the summed
turn durations, the turn count, the summed input tokens."""

ORDER_COLUMNS: dict[ConversationOrder, str] = {
    "last_seen": "last_start_ns",
    "first_seen": "first_start_ns",
    "duration": "duration_ns",
    "turns": "turns",
    "input_tokens": "input_tokens",
}

MATCH_FILTERS = {
    "start_ns": "Timestamp >= fromUnixTimestamp64Nano({start_ns:Int64})",
    "end_ns": "Timestamp <= fromUnixTimestamp64Nano({end_ns:Int64})",
    "search": "positionCaseInsensitive(ConversationId, {search:String}) > 0",
    "service": "RootService = {service:String}",
}
"""Which conversations match, as conditions on their turns: one turn starting in the window, of the service, with
an ID containing ``search`` (case ignored) makes its conversation match; only those whose parameter is set apply."""

TOTAL_FILTERS = {
    "min_duration_ns": "duration_ns >= {min_duration_ns:UInt64}",
    "max_duration_ns": "duration_ns <= {max_duration_ns:UInt64}",
}
"""Conditions on a matching conversation's totals (``HAVING``)."""

CONVERSATIONS = """
SELECT
    ConversationId AS conversation_id,
    argMin(RootService, Timestamp) AS service,
    count() AS turns,
    toUnixTimestamp64Nano(min(Timestamp)) AS first_start_ns,
    toUnixTimestamp64Nano(max(Timestamp)) AS last_start_ns,
    sum(DurationNs) AS duration_ns,
    sum(LlmCalls) AS llm_calls,
    sum(InputTokens) AS input_tokens,
    sum(OutputTokens) AS output_tokens,
    sum(CachedInputTokens) AS cached_input_tokens,
    sum(ErrorCount) AS errors,
    groupArray(TraceId) AS trace_ids
FROM hotspan_trace_summary FINAL
WHERE {owner} AND ConversationId GLOBAL IN (
    SELECT ConversationId FROM hotspan_trace_summary_by_time FINAL WHERE {owner} AND ConversationId != '' AND {match}
)
GROUP BY conversation_id
HAVING {totals}
ORDER BY {order} DESC, conversation_id
LIMIT {{limit:UInt32}}
"""
"""A template: the matching conversations (:data:`MATCH_FILTERS` in ``{match}``, :data:`TOTAL_FILTERS` in
``{totals}``, the owner condition in ``{owner}``), each with every turn it has (not only those in the window), sorted
by ``{order}`` (an :data:`ORDER_COLUMNS` value): service is its first turn's root service, duration_ns the summed turn
durations (the time its user waited), trace_ids its turns (for their cost, priced in the query room). ``GLOBAL IN``:
on a cluster a conversation's turns live on the shards of their traces, so the matching IDs are gathered over every
shard before each shard sums its turns (a local ``IN`` would drop the turns of shards without a match)."""

TURNS = f"""
SELECT
    TraceId AS trace_id,
    RootService AS service,
    RootName AS root_name,
    toUnixTimestamp64Nano(Timestamp) AS start_ns,
    DurationNs AS duration_ns,
    arrayMap(stage -> StageNs[stage], {{stages:Array(String)}}) AS stage_ns,
    Model AS model,
    LlmCalls AS llm_calls,
    InputTokens AS input_tokens,
    OutputTokens AS output_tokens,
    CachedInputTokens AS cached_input_tokens,
    ErrorCount AS errors,
    Sampled AS sampled
FROM hotspan_trace_summary FINAL
WHERE {OWNER_FILTER} AND ConversationId = {{conversation_id:String}}
ORDER BY start_ns, trace_id
LIMIT {{limit:UInt32}}
"""
"""The turns of one conversation in time order (at most ``limit``): per turn its request's root, start, duration, the
critical-path ns of each stage of ``stages`` (0 where absent), model, calls and tokens."""
