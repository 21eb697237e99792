-- Lets the RED rollup hold a projection (0101). An AggregatingMergeTree merges rows that share their sorting key,
-- so a projection's rows would go stale at each merge; 'rebuild' builds the merged part's projection again from
-- the merged rows (ClickHouse refuses ADD PROJECTION on this engine until the mode is set).
ALTER TABLE hotspan_red_minutes MODIFY SETTING deduplicate_merge_projection_mode = 'rebuild'
