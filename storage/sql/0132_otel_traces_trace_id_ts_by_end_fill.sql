-- Builds 0131's projection for the parts stored before it (a background mutation; reads use the table itself for
-- a part until its projection is built, so nothing reads differently meanwhile). Parts written after 0131 have it.
ALTER TABLE otel_traces_trace_id_ts MATERIALIZE PROJECTION by_end
