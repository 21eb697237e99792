-- The conversation each request is a turn of (analysis.conversation: the first of gen_ai.conversation.id,
-- session.id, langfuse.session.id its spans name; issue 32), so a conversation's turns are one read of the
-- summaries. '' when the request names none, and in rows written before this migration until the trace is
-- analysed again.
ALTER TABLE hotspan_trace_summary ADD COLUMN IF NOT EXISTS ConversationId String DEFAULT '' CODEC(ZSTD(1))
