-- One row per call between two nodes of the service graph: a CLIENT/PRODUCER span paired with the
-- SERVER/CONSUMER span it caused in another service, or one side alone with a virtual peer ("user" for a
-- root server span; peer.service, db.*, messaging.system or server.address for a client with no server).
-- Written by processors.pipeline.service_graph once per trace, when the trace has gone quiet; kept for
-- example traces per edge. Tenant is the trace's tenant, folded ('' → 'default'). Durations are ns; a side without a span has Has*Span = 0 and duration 0.
CREATE TABLE IF NOT EXISTS hotspan_service_graph_edges (
    Tenant LowCardinality(String) CODEC(ZSTD(1)),
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    Client LowCardinality(String) CODEC(ZSTD(1)),
    Server LowCardinality(String) CODEC(ZSTD(1)),
    ConnectionType LowCardinality(String) CODEC(ZSTD(1)),
    ClientSpanId String CODEC(ZSTD(1)),
    ServerSpanId String CODEC(ZSTD(1)),
    ClientSpanName LowCardinality(String) CODEC(ZSTD(1)),
    ServerSpanName LowCardinality(String) CODEC(ZSTD(1)),
    HasClientSpan UInt8,
    HasServerSpan UInt8,
    ClientDuration UInt64 CODEC(T64, ZSTD(1)),
    ServerDuration UInt64 CODEC(T64, ZSTD(1)),
    Failed UInt8
) ENGINE = MergeTree
PARTITION BY toDate(Timestamp)
ORDER BY (Tenant, Client, Server, toDateTime(Timestamp), Timestamp)
{ttl}
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, non_replicated_deduplication_window = 1000
