-- Copies every row written to hotspan_trace_summary (the pipeline's summaries, their refreshes) into 0110's table
-- sorted by time, in the same insert. `*` is read at each insert, so a column later added to both tables is copied
-- too. The deletion rows for moved starts are the store's own inserts, not this view's.
CREATE MATERIALIZED VIEW IF NOT EXISTS hotspan_trace_summary_by_time_mv
TO hotspan_trace_summary_by_time
AS SELECT *, toUInt8(0) AS Deleted
FROM hotspan_trace_summary
