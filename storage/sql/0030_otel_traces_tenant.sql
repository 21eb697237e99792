-- The tenant each span was stored for (storage.tenancy): taken from the sender's bearer token at ingest, never
-- from span content. An extra column at the end keeps the exporter's layout as is, so Grafana's ClickHouse
-- plugin still reads otel_traces and an OpenTelemetry Collector can keep writing into it; the rows such a
-- collector writes, like every row stored before this migration, have Tenant = '' and belong to the tenant
-- `default` (readers fold '' to 'default', see storage.trace_sql.TENANT).
ALTER TABLE otel_traces ADD COLUMN IF NOT EXISTS Tenant LowCardinality(String) DEFAULT '' CODEC(ZSTD(1))
