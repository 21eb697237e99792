-- Which copy of a span a row is (storage.writer.OnceWriter): 0 for the first copy stored, and for every row an
-- OpenTelemetry Collector or an earlier Hotspan wrote; for a later copy that differs from every stored one (a
-- span exported again, more complete), a number above every earlier copy's, taken from Hotspan's clock when
-- it stored it (ns since the epoch). Readers keep the highest Version per span (storage.trace_sql.IDENTITY);
-- rollups fed at insert count Version = 0 rows only, so a span counts once. An extra column at the end, as
-- Tenant (0030, just before): the exporter's columns stay as they are and an OTel Collector writing here leaves it 0.
ALTER TABLE otel_traces ADD COLUMN IF NOT EXISTS Version UInt64 DEFAULT 0 CODEC(T64, ZSTD(1))
