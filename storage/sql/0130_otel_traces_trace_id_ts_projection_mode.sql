-- Lets the trace-ID lookup hold a projection (0131). An AggregatingMergeTree merges the rows of one trace ID, so a
-- projection's rows would go stale at each merge; 'rebuild' builds the merged part's projection again from the
-- merged rows (ClickHouse refuses ADD PROJECTION on this engine until the mode is set). Tail sampling deletes the
-- lookup rows of the traces it drops (a lightweight DELETE, refused on a table with projections until its mode is
-- set): 'drop' leaves the parts it touches without the projection, read from the table itself until a merge
-- rebuilds it, where 'rebuild' would sort the whole part's projection again at every drop. The parts it touches
-- are the recent, small ones that hold the traces being decided.
ALTER TABLE otel_traces_trace_id_ts MODIFY SETTING
    deduplicate_merge_projection_mode = 'rebuild',
    lightweight_mutation_projection_mode = 'drop'
