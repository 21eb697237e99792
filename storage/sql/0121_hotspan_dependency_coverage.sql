-- Which minutes of hotspan_dependency_minutes hold the raw answer: per minute (all tenants), Covered = 1 when a
-- refresh recomputed it, 0 when it was found stale and not yet recomputed (more stale minutes than one refresh
-- takes) or when spans of it were deleted (tail sampling drops). Each minute's latest row (by Version, ns on the
-- ClickHouse clock) holds; a minute without a row is not covered. Spans that arrived after the last refresh's
-- watermark (hotspan_dependency_refreshes) make their traces' minutes stale until the next refresh: readers check.
CREATE TABLE IF NOT EXISTS hotspan_dependency_coverage (
    Timestamp DateTime CODEC(Delta(4), ZSTD(1)),
    Covered UInt8,
    Version UInt64 CODEC(ZSTD(1))
) ENGINE = ReplacingMergeTree(Version)
PARTITION BY toYYYYMM(Timestamp)
ORDER BY Timestamp
{ttl}
SETTINGS index_granularity = 8192
