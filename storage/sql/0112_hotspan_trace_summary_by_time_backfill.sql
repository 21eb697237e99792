-- The summaries stored before 0111's view existed enter 0110's table: each trace's latest version, at its start.
-- By position: here the copy's columns are the summaries' in their order, then Deleted. Rows the view copied
-- meanwhile are the same rows (same key and version), so FINAL reads each once, and running this again after a
-- crash between apply and record changes nothing a read sees.
INSERT INTO hotspan_trace_summary_by_time
SELECT *, toUInt8(0) AS Deleted
FROM hotspan_trace_summary FINAL
