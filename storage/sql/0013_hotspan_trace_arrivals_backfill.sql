-- Traces stored before 0012's view existed (an upgrade, or tables an OTel Collector filled) enter the work
-- list once, so the pipeline analyses them too: only while the list is still empty, so re-running this after
-- a crash between apply and record adds nothing. Same expressions as 0012.
INSERT INTO hotspan_trace_arrivals
SELECT
    if(Tenant = '', 'default', Tenant) AS Tenant,
    TraceId,
    now64(3) AS LastArrival,
    count() AS Spans,
    max(Timestamp) AS Timestamp
FROM otel_traces
WHERE TraceId != '' AND (SELECT count() FROM hotspan_trace_arrivals) = 0
GROUP BY Tenant, TraceId
