-- Remember the last 1000 insert blocks of otel_traces, so the collector's spool replay can repeat an
-- insert with the same insert_deduplication_token after a crash without storing spans twice
-- (replicated tables deduplicate by default; plain MergeTree only with this window).
ALTER TABLE otel_traces MODIFY SETTING non_replicated_deduplication_window = 1000
