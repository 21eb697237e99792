-- One row per finished refresh of the dependency rollup, stamped with its start (Timestamp, the ClickHouse clock):
-- every arrival (hotspan_trace_arrivals.LastArrival, same clock) up to Watermark is in the covered minutes. Readers
-- take the latest Watermark and treat as stale the minutes of every trace that received spans after it.
CREATE TABLE IF NOT EXISTS hotspan_dependency_refreshes (
    Timestamp DateTime64(3) CODEC(Delta(8), ZSTD(1)),
    Watermark DateTime64(3) CODEC(Delta(8), ZSTD(1))
) ENGINE = MergeTree
ORDER BY Timestamp
{ttl}
SETTINGS index_granularity = 8192
