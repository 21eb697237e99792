"""Service settings. Precedence: explicit argument > environment variable > default.

Environment variables (all optional), with defaults and units:

- ``HOTSPAN_DATA_DIR``: data directory (spool, embedded ClickHouse); path, default ``./.hotspan``.
- ``HOTSPAN_CLICKHOUSE_DSN``: ``chdb:///path`` (embedded) or ``http(s)://user:pass@host:8123``;
  default ``chdb://<data dir>/clickhouse``.
- ``HOTSPAN_CLICKHOUSE_DATABASE``: database holding ``otel_traces``; default ``otel`` (the exporter's).
- ``HOTSPAN_CLICKHOUSE_CLUSTER``: name of a ClickHouse cluster (the servers' ``remote_servers``) to lay the tables
  out on: ``ON CLUSTER`` DDL, ``Replicated*`` local tables and ``Distributed`` tables sharded by trace ID
  (``storage.layout``); default empty: one node.
- ``HOTSPAN_CLICKHOUSE_REPLICATED``: with a cluster, whether it has ClickHouse Keeper for ``ON CLUSTER`` DDL and
  replicated tables; ``false`` for shards of one replica without Keeper, each node then migrated on its own
  (``hotspan migrate`` against each); default ``true``.
- ``HOTSPAN_ROLE``: what this process runs (``hotspan.roles``): ``all`` (default: everything), ``collector``
  (OTLP receivers, spool, writer), ``query`` (REST and Jaeger APIs, UI, SLO evaluator; reads only) or ``pipeline``
  (the quiet-trace analysis only).
- ``HOTSPAN_PIPELINE_SHARD``: ``i/N``: this process's share of the quiet-trace analysis, the traces with
  ``cityHash64(TraceId) % N = i`` (``0 <= i < N``; run one process for each ``i``); default ``0/1`` (every trace).
- ``HOTSPAN_HOST``: bind address; default ``127.0.0.1``.
- ``HOTSPAN_HTTP_PORT``: OTLP/HTTP, REST API and UI; default 4318, 0 picks a free port.
- ``HOTSPAN_GRPC_PORT``: OTLP/gRPC; default 4317, 0 picks a free port, -1 disables.
- ``HOTSPAN_MAX_BODY_BYTES``: largest OTLP request body, compressed or inflated; bytes, default 16 MiB.
- ``HOTSPAN_MAX_REQUEST_SPANS``: most spans one OTLP request may hold, and most ``resourceSpans`` +
  ``scopeSpans`` entries; beyond, 413 (gRPC INVALID_ARGUMENT) before anything is decoded; count, default 200000.
- ``HOTSPAN_BODY_READ_TIMEOUT_S``: longest time to receive one OTLP/HTTP body; beyond, 408; seconds,
  default 30.
- ``HOTSPAN_DECODE_WAIT_S``: longest time a received OTLP/HTTP body waits for a decoder (as many as CPU
  cores); a request expected to wait longer is refused with 429 before its body is read; seconds, default 3.
- ``HOTSPAN_MAX_TRACE_SPANS``: the largest trace read whole: ``/api/v1/traces/{id}`` pages beyond it, the Jaeger
  APIs return the first spans by start with a warning (``api.trace_limits``), and the trace pipeline does not
  analyse a larger trace (it would hold every span in memory); count, default 100000.
- ``HOTSPAN_READ_WORKERS``: reads of the API's read routes that run at once, on threads of their own, never on the
  event loop answering OTLP and ``/healthz`` (``api.read_pool``); also the UI's callbacks and page loads that run at
  once, counted apart (``dashboards.request_guard``); count, default 2.
- ``HOTSPAN_READ_QUEUE``: reads that may wait for one of those threads (and UI requests for their turn); one more is
  refused at once with 503 ``reads_busy`` and ``Retry-After``; count, default 16.
- ``HOTSPAN_READ_TIMEOUT_S``: longest time one read statement of the query room may run (ClickHouse
  ``max_execution_time``); beyond, 503 with ``Retry-After``; seconds, default 30.
- ``HOTSPAN_READ_MAX_MEMORY_BYTES``: most memory one read statement of the query room may use (ClickHouse
  ``max_memory_usage``); beyond, 413; bytes, default 2 GiB.
- ``HOTSPAN_MAX_SEARCH_SPANS``: most spans a Jaeger trace search (v1 ``/api/traces``, v3 ``/api/v3/traces``) may
  return, all its traces together (ClickHouse ``max_result_rows``); beyond, 413; count, default 100000.
- ``HOTSPAN_TTL_DAYS``: drop partitions older than this; days, default 0 (keep forever).
- ``HOTSPAN_QUEUE_MAX_BYTES``: request bytes (decompressed) held in memory, admitted and not yet in the
  spool; beyond it OTLP/HTTP answers 429 and OTLP/gRPC UNAVAILABLE; bytes, default 64 MiB.
- ``HOTSPAN_QUEUE_MAX_SPANS``: spans admitted and not yet stored in ClickHouse (in memory or spooled),
  while ClickHouse is available; beyond it 429 / UNAVAILABLE; spans, default 200000.
- ``HOTSPAN_BATCH_MAX_SPANS``: most spans converted and written in one INSERT (bounds its memory); spans,
  default 20000.
- ``HOTSPAN_SPOOL_MAX_BYTES``: size of the fsynced on-disk spool (``<data dir>/ingest/spool``) every
  acknowledged request passes through; it absorbs traffic while ClickHouse fails; full → 503; bytes,
  default 1 GiB.
- ``HOTSPAN_RETRY_AFTER_S``: retry hint sent with 429/503 (``Retry-After``, gRPC RetryInfo), also the
  first back-off between insert retries; seconds, default 1.
- ``HOTSPAN_MAX_ATTRIBUTES``: attributes kept per span, event, link and resource (the rest dropped,
  the span marked ``hotspan.truncated``); count, default 256.
- ``HOTSPAN_MAX_ATTRIBUTE_VALUE_CHARS``: characters kept per attribute value; default 65536.
- ``HOTSPAN_MAX_EVENTS``: events kept per span; default 256.
- ``HOTSPAN_MAX_LINKS``: links kept per span; default 128.
- ``HOTSPAN_REDACTION``: payload redaction before storage (``collector.redaction``): ``default`` (the packaged
  rules, ``collector/redaction.yaml``: e-mail addresses, bearer tokens, API keys, AWS keys and Luhn-valid card
  numbers masked in GenAI and OpenInference message attributes and their events), ``off`` (stored as received), or
  the path of a YAML table of keys and rules added over the packaged one; default ``default``.
- ``HOTSPAN_AUTH_FILE``: YAML/JSON file of hashed bearer tokens, each with a tenant and roles
  (``hotspan.auth.config``); default none: no auth, one tenant (``default``), allowed on a loopback
  ``HOTSPAN_HOST`` only.
- ``HOTSPAN_TOKEN``: the bearer token ``hotspan import --endpoint`` sends to a running Hotspan (its tenant is the
  token's); default none (no ``Authorization`` header).
- ``HOTSPAN_SESSION_SECRET``: key signing UI session cookies, at least 32 characters, the same on every
  instance behind one load balancer; default a random key per process (sessions end with it).
- ``HOTSPAN_FAULT_INJECTION``: TEST HOOK, never set in production: makes storage fail on purpose
  (``storage.faults``, e.g. ``insert_fail_for_s=5``); default empty (off).
- ``HOTSPAN_TRACE_IDLE_S``: a trace is analysed (``processors.pipeline``) once no span of it has arrived
  for this long; seconds, default 10.
- ``HOTSPAN_STAGE_RULES``: YAML stage rule table (``analysis.stage_rules``); path, default the packaged one.
- ``HOTSPAN_HOTSPOT_RULES``: YAML hotspot rules, static thresholds and the rolling quantile
  (``processors.pipeline.hotspot_rules``); path, default the packaged one (rolling p95 only).
- ``HOTSPAN_HOTSPOT_WINDOW_S``: window of the rolling hotspot quantile; seconds, default 3600.
- ``HOTSPAN_PRICES``: YAML model price table for the cost of model calls (``analysis.pricing``); path, default the
  packaged one (``analysis/prices.yaml``).
- ``HOTSPAN_TAIL_SAMPLING``: YAML tail-sampling policies (``processors.pipeline.tail_sampling_policies``): once a
  trace is quiet and analysed, it is kept when a policy keeps it, else its raw spans are deleted (RED, service
  graph and request summaries still count it); path, default none (keep every trace).
- ``HOTSPAN_PROMETHEUS_URL``: Prometheus base URL holding vLLM's metrics (``http(s)://...``); the Services page
  plots them under the trace-derived latency and diagnosis reads them as evidence; default none (neither).
- ``HOTSPAN_PROMETHEUS_TIMEOUT_S``: per-query timeout of those reads; seconds, default 5.
- ``HOTSPAN_CAPACITY_TTFT_SLO_S``: the p95 time-to-first-token objective the capacity score
  (``diagnosis.capacity``, when ``HOTSPAN_PROMETHEUS_URL`` is set: on the Services page, ``GET /api/v1/capacity``
  and ``/metrics``) measures headroom against;
  seconds, default 2.
- ``HOTSPAN_CAPACITY_MAX_RATE_PER_S``: requests per second one engine is sized for (a load test's figure); the
  capacity score's rate part; default none (the rate is exported, not scored).
- ``HOTSPAN_CAPACITY_WINDOW_S``: how far back the capacity score reads the engines' metrics; seconds, default 300.
- ``HOTSPAN_DIAGNOSIS_RULES``: YAML diagnosis rule table merged over the packaged one (``diagnosis.table``); path,
  default the packaged one.
- ``HOTSPAN_ANOMALY``: whether the process owning the incident lifecycle (``all``, or pipeline worker 0:
  ``hotspan.roles``) runs the anomaly loop (``incidents``, fed by ``query.anomaly``'s scores): series leaving their
  robust baseline open incidents with the diagnosis of their window; ``true`` or ``false``, default ``true``.
- ``HOTSPAN_ANOMALY_INTERVAL_S``: seconds between its evaluations (each judges the last whole minute); default 15.
- ``HOTSPAN_ANOMALY_BASELINE_MINUTES``: minutes of trailing baseline (and the span of the seasonal one, a day back);
  default 30.
- ``HOTSPAN_ANOMALY_MIN_CALLS``: fewest calls in a minute's window before its latency or error rate is judged (and
  the fewest per minute of a series whose throughput is judged); default 20. A deviation must also be borne out by a
  count of slow or failed calls (``analysis.baseline.exceeds_baseline_rate``), so a lower value judges quieter series
  without letting two slow calls open an incident.
- ``HOTSPAN_ANOMALY_SETTLE_S``: how long after a minute ends it is judged (late spans, trace analysis); seconds,
  default 20.
- ``HOTSPAN_ANOMALY_FINDINGS``: whether a diagnosis finding new at ``warning`` or worse against the baseline window
  opens an incident by itself (faults that cost little latency yet: megabyte responses, a connection per call); it
  costs one diagnosis per root service and minute; ``true`` or ``false``, default ``true``.
- ``HOTSPAN_ANOMALY_ALERTMANAGER_URL`` / ``HOTSPAN_ANOMALY_WEBHOOK_URL``: where incidents are sent; default the SLO
  file's ``alertmanager_url`` / ``webhook_url`` when ``HOTSPAN_ALERTS`` is set, else nowhere (incidents are still
  stored and shown).
- ``HOTSPAN_ALERTS``: SLO file (YAML, ``alerts.config``); when set, ``hotspan serve`` runs the built-in SLO
  evaluator (``alerts.evaluator``) that notifies the Alertmanager and/or webhook the file names; path,
  default none (no evaluator).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator, model_validator

from api.read_pool import DEFAULT_READ_QUEUE, DEFAULT_READ_WORKERS
from collector.http_receiver import DEFAULT_BODY_READ_TIMEOUT_S, DEFAULT_DECODE_WAIT_S, DEFAULT_MAX_BODY_BYTES
from collector.ingest_pipeline import IngestConfig
from collector.limits import SpanLimits
from collector.otlp_body import DEFAULT_MAX_REQUEST_SPANS
from collector.redaction import DEFAULT as DEFAULT_REDACTION
from diagnosis.capacity import CapacitySettings
from diagnosis.metrics import DEFAULT_PROMETHEUS_TIMEOUT_S
from processors.pipeline.config import TracePipelineConfig
from query.anomaly import AnomalySettings
from storage.clickhouse import ReadBudget
from storage.faults import FaultPlan
from storage.layout import Layout
from storage.reader import MAX_SEARCH_SPANS, MAX_TRACE_SPANS
from storage.rollup_sql import CARDINALITY_LIMIT

Role = Literal["all", "collector", "query", "pipeline"]
"""What one Hotspan process runs (``hotspan.roles`` says which parts each starts)."""
ROLES: tuple[str, ...] = get_args(Role)

ENVIRONMENT = {
    "data_dir": "HOTSPAN_DATA_DIR",
    "clickhouse_dsn": "HOTSPAN_CLICKHOUSE_DSN",
    "clickhouse_database": "HOTSPAN_CLICKHOUSE_DATABASE",
    "clickhouse_cluster": "HOTSPAN_CLICKHOUSE_CLUSTER",
    "clickhouse_replicated": "HOTSPAN_CLICKHOUSE_REPLICATED",
    "role": "HOTSPAN_ROLE",
    "pipeline_shard": "HOTSPAN_PIPELINE_SHARD",
    "host": "HOTSPAN_HOST",
    "http_port": "HOTSPAN_HTTP_PORT",
    "grpc_port": "HOTSPAN_GRPC_PORT",
    "admin_port": "HOTSPAN_ADMIN_PORT",
    "max_body_bytes": "HOTSPAN_MAX_BODY_BYTES",
    "max_request_spans": "HOTSPAN_MAX_REQUEST_SPANS",
    "body_read_timeout_s": "HOTSPAN_BODY_READ_TIMEOUT_S",
    "max_trace_spans": "HOTSPAN_MAX_TRACE_SPANS",
    "ui_max_body_bytes": "HOTSPAN_UI_MAX_BODY_BYTES",
    "cardinality_limit": "HOTSPAN_CARDINALITY_LIMIT",
    "decode_wait_s": "HOTSPAN_DECODE_WAIT_S",
    "read_workers": "HOTSPAN_READ_WORKERS",
    "read_queue": "HOTSPAN_READ_QUEUE",
    "read_timeout_s": "HOTSPAN_READ_TIMEOUT_S",
    "read_max_memory_bytes": "HOTSPAN_READ_MAX_MEMORY_BYTES",
    "max_search_spans": "HOTSPAN_MAX_SEARCH_SPANS",
    "ttl_days": "HOTSPAN_TTL_DAYS",
    "queue_max_bytes": "HOTSPAN_QUEUE_MAX_BYTES",
    "queue_max_spans": "HOTSPAN_QUEUE_MAX_SPANS",
    "batch_max_spans": "HOTSPAN_BATCH_MAX_SPANS",
    "spool_max_bytes": "HOTSPAN_SPOOL_MAX_BYTES",
    "retry_after_s": "HOTSPAN_RETRY_AFTER_S",
    "max_attributes": "HOTSPAN_MAX_ATTRIBUTES",
    "max_attribute_value_chars": "HOTSPAN_MAX_ATTRIBUTE_VALUE_CHARS",
    "max_events": "HOTSPAN_MAX_EVENTS",
    "max_links": "HOTSPAN_MAX_LINKS",
    "redaction": "HOTSPAN_REDACTION",
    "fault_injection": "HOTSPAN_FAULT_INJECTION",
    "trace_idle_s": "HOTSPAN_TRACE_IDLE_S",
    "visibility_margin_s": "HOTSPAN_VISIBILITY_MARGIN_S",
    "dependency_refresh_s": "HOTSPAN_DEPENDENCY_REFRESH_S",
    "stage_rules_path": "HOTSPAN_STAGE_RULES",
    "hotspot_rules_path": "HOTSPAN_HOTSPOT_RULES",
    "hotspot_window_s": "HOTSPAN_HOTSPOT_WINDOW_S",
    "prices_path": "HOTSPAN_PRICES",
    "tail_sampling_path": "HOTSPAN_TAIL_SAMPLING",
    "auth_file": "HOTSPAN_AUTH_FILE",
    "session_secret": "HOTSPAN_SESSION_SECRET",
    "token": "HOTSPAN_TOKEN",
    "prometheus_url": "HOTSPAN_PROMETHEUS_URL",
    "prometheus_timeout_s": "HOTSPAN_PROMETHEUS_TIMEOUT_S",
    "capacity_ttft_slo_s": "HOTSPAN_CAPACITY_TTFT_SLO_S",
    "capacity_max_rate_per_s": "HOTSPAN_CAPACITY_MAX_RATE_PER_S",
    "capacity_window_s": "HOTSPAN_CAPACITY_WINDOW_S",
    "diagnosis_rules_path": "HOTSPAN_DIAGNOSIS_RULES",
    "alerts_path": "HOTSPAN_ALERTS",
    "anomaly": "HOTSPAN_ANOMALY",
    "anomaly_interval_s": "HOTSPAN_ANOMALY_INTERVAL_S",
    "anomaly_baseline_minutes": "HOTSPAN_ANOMALY_BASELINE_MINUTES",
    "anomaly_min_calls": "HOTSPAN_ANOMALY_MIN_CALLS",
    "anomaly_settle_s": "HOTSPAN_ANOMALY_SETTLE_S",
    "anomaly_findings": "HOTSPAN_ANOMALY_FINDINGS",
    "anomaly_alertmanager_url": "HOTSPAN_ANOMALY_ALERTMANAGER_URL",
    "anomaly_webhook_url": "HOTSPAN_ANOMALY_WEBHOOK_URL",
}
"""Setting name → environment variable."""


class SettingsError(ValueError):
    """Invalid settings; the message lists every bad key at once."""


class Settings(BaseModel):
    """Validated settings of one Hotspan process."""

    data_dir: Path = Path(".hotspan")
    clickhouse_dsn: str = ""
    clickhouse_database: str = Field("otel", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    clickhouse_cluster: str = Field("", pattern=r"^([A-Za-z_][A-Za-z0-9_]*)?$")
    clickhouse_replicated: bool = True
    role: Role = "all"
    pipeline_shard: str = Field("0/1", pattern=r"^\d+/\d+$")
    host: str = "127.0.0.1"
    http_port: int = Field(4318, ge=0, le=65535)
    grpc_port: int = Field(4317, ge=-1, le=65535)
    admin_port: int = Field(
        -1,
        ge=-1,
        le=65535,
        description="A second HTTP listener serving only /healthz, on a thread and event loop of its own, so a "
        "probe is answered at once even while the main port's loop works through a burst of senders (Jaeger's "
        "admin port and the OpenTelemetry Collector's health_check extension keep health off the data path the "
        "same way); -1: none, 0: a free port.",
    )
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, ge=1024)
    max_request_spans: int = Field(DEFAULT_MAX_REQUEST_SPANS, ge=1)
    body_read_timeout_s: float = Field(DEFAULT_BODY_READ_TIMEOUT_S, gt=0)
    max_trace_spans: int = Field(MAX_TRACE_SPANS, ge=1)
    ui_max_body_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        description="Largest request body under /ui (a Dash callback), bytes: 413 above, before the body is read.",
    )
    cardinality_limit: int = Field(
        CARDINALITY_LIMIT,
        ge=1,
        description="Most series per metric family on /metrics and most groups (edges) per RED, Services and "
        'topology read; the rest fold into one series or row marked otel_metric_overflow="true" (the OTel '
        "spanmetrics connector's aggregation_cardinality_limit).",
    )
    decode_wait_s: float = Field(DEFAULT_DECODE_WAIT_S, gt=0)
    read_workers: int = Field(DEFAULT_READ_WORKERS, ge=1)
    read_queue: int = Field(DEFAULT_READ_QUEUE, ge=0)
    read_timeout_s: float = Field(ReadBudget.time_s, gt=0)
    read_max_memory_bytes: int = Field(ReadBudget.memory_bytes, ge=64 * 1024**2)
    max_search_spans: int = Field(MAX_SEARCH_SPANS, ge=1)
    ttl_days: int = Field(0, ge=0)
    queue_max_bytes: int = Field(IngestConfig.queue_max_bytes, ge=1024)
    queue_max_spans: int = Field(IngestConfig.queue_max_spans, ge=1)
    batch_max_spans: int = Field(IngestConfig.batch_max_spans, ge=1)
    spool_max_bytes: int = Field(IngestConfig.spool_max_bytes, ge=0)
    retry_after_s: float = Field(IngestConfig.retry_after_s, gt=0)
    max_attributes: int = Field(SpanLimits.max_attributes, ge=1)
    max_attribute_value_chars: int = Field(SpanLimits.max_value_chars, ge=1)
    max_events: int = Field(SpanLimits.max_events, ge=0)
    max_links: int = Field(SpanLimits.max_links, ge=0)
    redaction: str = Field(
        DEFAULT_REDACTION,
        min_length=1,
        description="'default' (the packaged redaction rules), 'off', or the path of a YAML redaction table.",
    )
    fault_injection: str = ""
    auth_file: Path | None = None
    session_secret: SecretStr | None = Field(None, min_length=32)
    token: SecretStr | None = None
    trace_idle_s: float = Field(TracePipelineConfig.trace_idle_s, ge=0)
    visibility_margin_s: float = Field(TracePipelineConfig.visibility_margin_s, ge=0)
    dependency_refresh_s: float = Field(TracePipelineConfig.dependency_refresh_s, ge=0)
    stage_rules_path: Path | None = None
    hotspot_rules_path: Path | None = None
    hotspot_window_s: float = Field(TracePipelineConfig.hotspot_window_s, gt=0)
    prices_path: Path | None = None
    tail_sampling_path: Path | None = None
    prometheus_url: str | None = Field(None, pattern=r"^https?://")
    prometheus_timeout_s: float = Field(DEFAULT_PROMETHEUS_TIMEOUT_S, gt=0)
    capacity_ttft_slo_s: float = Field(CapacitySettings.ttft_slo_s, gt=0)
    capacity_max_rate_per_s: float | None = Field(None, gt=0)
    capacity_window_s: float = Field(CapacitySettings.window_s, gt=0)
    diagnosis_rules_path: Path | None = None
    alerts_path: Path | None = None
    anomaly: bool = True
    anomaly_interval_s: float = Field(15.0, gt=0)
    anomaly_baseline_minutes: int = Field(AnomalySettings.baseline_minutes, ge=5)
    anomaly_min_calls: int = Field(AnomalySettings.min_calls, ge=1)
    anomaly_settle_s: float = Field(AnomalySettings.settle_s, ge=0)
    anomaly_findings: bool = AnomalySettings.findings
    anomaly_alertmanager_url: str | None = Field(None, pattern=r"^https?://")
    anomaly_webhook_url: str | None = Field(None, pattern=r"^https?://")

    @field_validator("fault_injection")
    @classmethod
    def _fault_plan(cls, value: str) -> str:
        FaultPlan.parse(value)
        return value

    @field_validator("pipeline_shard")
    @classmethod
    def _pipeline_shard(cls, value: str) -> str:
        shard, shards = map(int, value.split("/"))
        if not 0 <= shard < shards:
            raise ValueError(f"i/N needs 0 <= i < N, got {value}")
        return value

    @model_validator(mode="after")
    def _default_dsn(self) -> Settings:
        if not self.clickhouse_dsn:
            self.clickhouse_dsn = f"chdb://{(self.data_dir / 'clickhouse').resolve()}"
        elif not self.clickhouse_dsn.startswith(("chdb:", "http://", "https://")):
            raise ValueError("clickhouse_dsn must start with chdb:, http:// or https://")
        return self

    @property
    def read_budget(self) -> ReadBudget:
        """What one read statement of the query room may cost (``storage.clickhouse.ReadBudget``)."""
        return ReadBudget(self.read_timeout_s, self.read_max_memory_bytes)

    @property
    def layout(self) -> Layout:
        """Where the tables live (``storage.layout``): one node, or the cluster ``clickhouse_cluster``."""
        return Layout(self.clickhouse_cluster or None, self.clickhouse_replicated)

    @property
    def pipeline_split(self) -> tuple[int, int]:
        """``pipeline_shard`` as (i, N): this process analyses the traces with ``cityHash64(TraceId) % N = i``."""
        shard, shards = map(int, self.pipeline_shard.split("/"))
        return shard, shards


def load_settings(**overrides: Any) -> Settings:
    """Settings from ``overrides`` (``None`` values ignored), then the environment, then defaults.

    Raises:
        SettingsError: one or more values are invalid; each named by setting and variable.
    """
    values: dict[str, Any] = {
        name: os.environ[variable] for name, variable in ENVIRONMENT.items() if os.environ.get(variable)
    }
    values.update({name: value for name, value in overrides.items() if value is not None})
    try:
        return Settings(**values)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            name = ".".join(str(p) for p in err["loc"]) or "settings"
            variable = ENVIRONMENT.get(str(err["loc"][0]), "-") if err["loc"] else "-"
            problems.append(f"{name} ({variable}): {err['msg']}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from exc
