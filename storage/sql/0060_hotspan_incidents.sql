-- Incidents the anomaly detector (query.anomaly) opened: a series (a (service, operation) or a (root service,
-- stage), and a metric: p95 latency, error rate or throughput) that left its robust baseline, with the window,
-- baseline against observed values, every series that deviated with it (Series, JSON), the diagnosis findings of
-- the window against the baseline window (Findings, JSON), the topology neighbours of the service and example
-- traces. One row per (incident, version): re-evaluating a window writes the same IncidentId again (derived from
-- the tenant, the series group and the opening window) and a later state (more series, resolved) a higher
-- Version, so ReplacingMergeTree keeps one row per incident and reads take the newest version (LIMIT 1 BY).
-- Tenant is the owner tenant (storage.tenancy; never ''). Times are ns (DateTime64(9)); values are in the unit
-- their Metric names (ms, a 0..1 ratio, calls per minute).
CREATE TABLE IF NOT EXISTS hotspan_incidents (
    Tenant LowCardinality(String) CODEC(ZSTD(1)),
    IncidentId String CODEC(ZSTD(1)),
    Status LowCardinality(String) CODEC(ZSTD(1)),
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    WindowEnd DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    BaselineStart DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    BaselineEnd DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    Seasonal Bool,
    Kind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    Name LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    Metric LowCardinality(String) CODEC(ZSTD(1)),
    BaselineValue Float64,
    ObservedValue Float64,
    Score Float64,
    Services Array(String) CODEC(ZSTD(1)),
    Series String CODEC(ZSTD(3)),
    Findings String CODEC(ZSTD(3)),
    Neighbours Array(String) CODEC(ZSTD(1)),
    ExampleTraceIds Array(String) CODEC(ZSTD(1)),
    LastDeviationEnd DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    ResolvedAt Nullable(DateTime64(9)),
    Version UInt64
) ENGINE = ReplacingMergeTree(Version)
ORDER BY (Tenant, IncidentId)
{ttl}
SETTINGS index_granularity = 8192
