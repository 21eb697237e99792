-- Service-graph rollup: per minute and edge (client, server, connection type), calls, failed calls and the
-- latency quantile states seen by each side (ns). Filled by 0026's view from hotspan_service_graph_edges.
CREATE TABLE IF NOT EXISTS hotspan_service_graph_minutes (
    Tenant LowCardinality(String) CODEC(ZSTD(1)),
    Timestamp DateTime CODEC(Delta(4), ZSTD(1)),
    Client LowCardinality(String) CODEC(ZSTD(1)),
    Server LowCardinality(String) CODEC(ZSTD(1)),
    ConnectionType LowCardinality(String) CODEC(ZSTD(1)),
    Calls SimpleAggregateFunction(sum, UInt64),
    Failed SimpleAggregateFunction(sum, UInt64),
    ClientDurationQuantiles AggregateFunction(quantiles(0.5, 0.95, 0.99), UInt64),
    ServerDurationQuantiles AggregateFunction(quantiles(0.5, 0.95, 0.99), UInt64)
) ENGINE = AggregatingMergeTree
PARTITION BY toDate(Timestamp)
ORDER BY (Tenant, Client, Server, ConnectionType, Timestamp)
{ttl}
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
