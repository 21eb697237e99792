CREATE MATERIALIZED VIEW IF NOT EXISTS hotspan_service_graph_minutes_mv
TO hotspan_service_graph_minutes
AS SELECT
    Tenant,
    toStartOfMinute(Timestamp) AS Timestamp,
    Client,
    Server,
    ConnectionType,
    count() AS Calls,
    sum(Failed) AS Failed,
    quantilesStateIf(0.5, 0.95, 0.99)(ClientDuration, HasClientSpan = 1) AS ClientDurationQuantiles,
    quantilesStateIf(0.5, 0.95, 0.99)(ServerDuration, HasServerSpan = 1) AS ServerDurationQuantiles
FROM hotspan_service_graph_edges
GROUP BY Tenant, Timestamp, Client, Server, ConnectionType
