-- The arrivals view (0012) keys traces by their owner tenant, so otel_traces needs its Tenant column before
-- the view exists. This is 0030's statement, word for word (see there for the column's meaning): whichever
-- of the two runs first adds the column, the other finds it and does nothing.
ALTER TABLE otel_traces ADD COLUMN IF NOT EXISTS Tenant LowCardinality(String) DEFAULT '' CODEC(ZSTD(1))
