"""Which conversation a request (trace) is a turn of.

An agent's user lives in a conversation: each turn is one trace, and the instrumentation names the conversation on
its spans under one of several keys (:data:`CONVERSATION_KEYS`). The pipeline stores the first one it finds per
trace (``hotspan_trace_summary.ConversationId``, migration 0090), so a conversation is a filter on that column.
"""

from __future__ import annotations

import polars as pl

from analysis.spans import attribute

CONVERSATION_KEYS: tuple[str, ...] = (
    "gen_ai.conversation.id",
    "session.id",
    "langfuse.session.id",
    "conversation.id",
)
"""Attributes naming a trace's conversation, in order of preference: GenAI semconv's ``gen_ai.conversation.id``
(pydantic-ai, Google ADK, Strands), ``session.id`` (OpenInference's ``using_session``, Claude Code, OTel's session
semconv), Langfuse's ``langfuse.session.id`` (``propagate_attributes(session_id=...)``) and the Codex CLI's
``conversation.id`` (its thread, on every turn's ``run_turn`` span)."""


def conversation_key(frame: pl.DataFrame) -> pl.Expr:
    """Per span of a prepared frame (:mod:`analysis.spans`), the conversation it names (String, null where none):
    the first of :data:`CONVERSATION_KEYS` among its attributes, then among its resource's (``session.id`` is a
    resource attribute in browser and mobile SDKs) when the frame has ``resource_attributes``. Empty names read
    as none."""
    keys = [attribute(key) for key in CONVERSATION_KEYS]
    if "resource_attributes" in frame.columns:
        keys += [attribute(key, "resource_attributes") for key in CONVERSATION_KEYS]
    return pl.coalesce(*(key.replace("", None) for key in keys)).alias("conversation_id")
