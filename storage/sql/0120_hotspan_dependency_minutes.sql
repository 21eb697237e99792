-- The dependency rollup: per tenant, minute and (parent service, child service), the calls /api/dependencies counts
-- from the raw spans (storage.trace_sql.DEPENDENCY_CALLS: children starting in the minute, each once, whose parent
-- span is of another service). Written by storage.dependency_rollup's refresh, never by a view: a child and its
-- parent may arrive in different inserts. A minute is rewritten whole at each refresh that recomputes it, with a
-- newer Version and Calls = 0 for a pair it no longer has; readers take each key's latest row (argMax: on a cluster
-- one key's rows may lie on two shards, where FINAL would not meet them). Which minutes hold the raw answer is
-- hotspan_dependency_coverage's to say.
CREATE TABLE IF NOT EXISTS hotspan_dependency_minutes (
    Tenant LowCardinality(String) CODEC(ZSTD(1)),
    Timestamp DateTime CODEC(Delta(4), ZSTD(1)),
    Parent LowCardinality(String) CODEC(ZSTD(1)),
    Child LowCardinality(String) CODEC(ZSTD(1)),
    Calls UInt64 CODEC(T64, ZSTD(1)),
    Version UInt64 CODEC(ZSTD(1))
) ENGINE = ReplacingMergeTree(Version)
PARTITION BY toDate(Timestamp)
ORDER BY (Tenant, Timestamp, Parent, Child)
{ttl}
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1
