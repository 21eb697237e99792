-- The service-graph rollup sorted by time within a tenant, so a window of every edge reads the window's granules,
-- not every edge's day (as 0101 for the RED rollup).
ALTER TABLE hotspan_service_graph_minutes ADD PROJECTION IF NOT EXISTS by_time (
    SELECT * ORDER BY (Tenant, Timestamp, Client, Server, ConnectionType)
)
