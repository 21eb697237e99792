"""Assembly of one Hotspan process: storage, OTLP receivers, REST API and UI."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from a2wsgi import WSGIMiddleware
from dash.exceptions import DependencyException
from fastapi import FastAPI
from fastapi.responses import RedirectResponse

from alerts.config import AlertsConfig
from alerts.evaluator import SloEvaluator, diagnosis_annotations
from alerts.notify import build_notifiers
from analysis import STAGES, load_stage_rules
from analysis.pricing import load_price_table
from api import analysis_routes as analysis_api
from api import capacity as capacity_api
from api import conversations as conversations_api
from api import diagnosis as diagnosis_api
from api import incidents as incidents_api
from api import payloads as payloads_api
from api import red as red_api
from api import throughput_latency as throughput_latency_api
from api import topology as topology_api
from api import trace_page as trace_page_api
from api import traces as traces_api
from api.errors import install_error_handlers
from api.jaeger import routes_v1 as jaeger_v1
from api.jaeger import routes_v3 as jaeger_v3
from api.mcp_endpoint import mount_mcp
from api.models import Health
from api.read_pool import ReadPool
from api.tempo import routes as tempo_api
from api.trace_limits import TraceReadLimits
from collector import http_receiver
from collector.ingest_pipeline import IngestConfig, IngestPipeline
from collector.limits import SpanLimits
from collector.metrics import IngestMetrics
from collector.redaction import Redactor, load_redaction, packaged_table
from dashboards.app import build_dash_app
from dashboards.request_guard import UiRequestGuard
from diagnosis import DiagnosisSettings, PrometheusMetricsSource, load_diagnosis_settings
from diagnosis.capacity import CapacitySettings
from hotspan import metrics as metrics_routes
from hotspan.auth import Auth, load_auth, protect_app
from hotspan.capacity_metrics import CapacityCollector
from hotspan.docs import install_docs
from hotspan.health import StorageProbe
from hotspan.roles import PARTS
from hotspan.settings import Settings
from incidents.lifecycle import AnomalyDetector
from incidents.loop import AnomalyLoop
from processors.pipeline.base import TraceProcessor
from processors.pipeline.config import TracePipelineConfig
from processors.pipeline.hotspot_rules import load_hotspot_rules
from processors.pipeline.service_graph import ServiceGraphProcessor
from processors.pipeline.tail_sampling import TailSampler, TailSamplingMetrics
from processors.pipeline.tail_sampling_policies import load_tail_sampling
from processors.pipeline.trace_metrics import TraceMetrics, TraceMetricsProcessor
from processors.pipeline.trace_pipeline import TracePipeline, TracePipelineMetrics
from query.anomaly import AnomalySettings
from query.capacity import CapacityService
from query.service import QueryService
from storage.analysis_store import ClickHouseAnalysisStore
from storage.clickhouse import ClickHouse
from storage.dependency_rollup import DependencyRollup
from storage.engine_metrics import PrometheusEngineMetrics
from storage.engine_reader import ClickHouseEngineReader
from storage.faults import FaultInjectingClickHouse, FaultPlan
from storage.incident_store import ClickHouseIncidentStore
from storage.migrations import apply_migrations
from storage.payloads import ClickHousePayloadStore
from storage.reader import ClickHouseTraceReader
from storage.service_graph_writer import ClickHouseServiceGraphWriter
from storage.writer import ClickHouseTraceWriter

log = logging.getLogger(__name__)


@dataclass
class Storage:
    """The opened store and its read and write sides."""

    clickhouse: ClickHouse
    reader: ClickHouseTraceReader
    writer: ClickHouseTraceWriter


def open_storage(settings: Settings) -> Storage:
    """Open ClickHouse per ``settings`` and apply pending migrations.

    Raises:
        storage.clickhouse.StorageError: the store cannot be opened.
    """
    if settings.clickhouse_dsn.startswith("chdb:"):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    ch = ClickHouse(settings.clickhouse_dsn, settings.clickhouse_database, settings.layout)
    applied = apply_migrations(ch, settings.ttl_days)
    if applied:
        log.info("applied migrations %s", applied)
    return Storage(ch, ClickHouseTraceReader(ch), ClickHouseTraceWriter(ch))


def open_pipeline(settings: Settings, metrics: IngestMetrics) -> IngestPipeline:
    """The started ingest pipeline for ``settings`` (storage faults only when the test hook is set).

    Raises:
        collector.redaction.RedactionRulesError: the ``HOTSPAN_REDACTION`` file is invalid (every problem listed).
    """
    plan = FaultPlan.parse(settings.fault_injection) if settings.fault_injection else None

    def open_handle() -> ClickHouse:
        ch = ClickHouse(settings.clickhouse_dsn, settings.clickhouse_database, settings.layout)
        return FaultInjectingClickHouse(ch, plan) if plan else ch

    limits = SpanLimits(
        settings.max_attributes, settings.max_attribute_value_chars, settings.max_events, settings.max_links
    )
    config = IngestConfig(
        queue_max_bytes=settings.queue_max_bytes,
        queue_max_spans=settings.queue_max_spans,
        batch_max_spans=settings.batch_max_spans,
        spool_max_bytes=settings.spool_max_bytes,
        retry_after_s=settings.retry_after_s,
        limits=limits,
        redaction=load_redaction(settings.redaction),
    )
    pipeline = IngestPipeline(open_handle, settings.data_dir, config, metrics)
    pipeline.start()
    return pipeline


def trace_pipeline_config(settings: Settings) -> TracePipelineConfig:
    """The trace pipeline's and the analysis API's configuration from ``settings`` (rule files read).

    Raises:
        analysis.StageRulesError, processors.pipeline.hotspot_rules.HotspotRulesError,
            analysis.pricing.PriceTableError, processors.pipeline.tail_sampling_policies.TailSamplingError: a rule,
            price or policy file is unreadable or invalid (every problem listed).
    """
    return TracePipelineConfig(
        trace_idle_s=settings.trace_idle_s,
        stage_rules=load_stage_rules(settings.stage_rules_path),
        hotspot_rules=load_hotspot_rules(settings.hotspot_rules_path),
        hotspot_window_s=settings.hotspot_window_s,
        prices=load_price_table(settings.prices_path),
        max_trace_spans=settings.max_trace_spans,
        tail_sampling=load_tail_sampling(settings.tail_sampling_path),
        visibility_margin_s=settings.visibility_margin_s,
        dependency_refresh_s=settings.dependency_refresh_s,
    )


def diagnosis_settings(settings: Settings) -> DiagnosisSettings:
    """The diagnosis rule table and engine-metrics source from ``settings`` (rule file read).

    Raises:
        diagnosis.RuleTableError: the rule table file is invalid.
    """
    return load_diagnosis_settings(
        prometheus_url=settings.prometheus_url,
        prometheus_timeout_s=settings.prometheus_timeout_s,
        rules_path=settings.diagnosis_rules_path,
    )


def trace_processors(storage: Storage, metrics: TraceMetrics | None = None) -> list[TraceProcessor]:
    """The extensions the trace pipeline runs on every batch (``processors.pipeline.base``), the same list for
    ``hotspan serve`` (with the process's ``metrics``) and ``hotspan import`` (without), so imported traces
    are counted like received ones: service-graph edges into ClickHouse (and the servicegraph metrics), and,
    with ``metrics``, span, stage and hotspot metrics."""
    processors: list[TraceProcessor] = [
        ServiceGraphProcessor(ClickHouseServiceGraphWriter(storage.clickhouse), metrics)
    ]
    if metrics is not None:
        processors.append(TraceMetricsProcessor(metrics, storage.reader))
    return processors


def open_query(settings: Settings, storage: Storage) -> QueryService:
    """The query room over ``storage`` with the configured stage rules, prices, diagnosis rules and engine
    metrics: what the REST API, the UI and the SLO evaluator all read through. Its statements carry the read budget
    (``HOTSPAN_READ_TIMEOUT_S``, ``HOTSPAN_READ_MAX_MEMORY_BYTES``), a trace search's spans
    ``HOTSPAN_MAX_SEARCH_SPANS``; ingest and the trace pipeline read and write unbudgeted.

    Raises:
        analysis.StageRulesError, processors.pipeline.hotspot_rules.HotspotRulesError,
            analysis.pricing.PriceTableError, diagnosis.RuleTableError: a configured table is invalid.
    """
    reads = storage.clickhouse.budgeted(settings.read_budget)
    return QueryService.build(
        ClickHouseTraceReader(reads, settings.max_search_spans),
        ClickHouseAnalysisStore(reads, STAGES),
        ClickHouseEngineReader(reads),
        trace_pipeline_config(settings),
        diagnosis_settings(settings),
        ClickHouseIncidentStore(reads),
        engine_metrics(settings),
        capacity_service(settings),
        settings.cardinality_limit,
    )


def payload_store(settings: Settings) -> ClickHousePayloadStore:
    """Deletes the payloads ``HOTSPAN_REDACTION``'s table names (the packaged table's where redaction is off), on a
    handle of its own: a deletion waits for its mutation, which must not hold up the reads' handle.

    Raises:
        collector.redaction.RedactionRulesError: the ``HOTSPAN_REDACTION`` file is invalid.
        storage.clickhouse.StorageError: the store cannot be opened.
    """
    named = Redactor(load_redaction(settings.redaction) or packaged_table())
    handle = ClickHouse(settings.clickhouse_dsn, settings.clickhouse_database, settings.layout)
    return ClickHousePayloadStore(handle, named.key_regex, named.event_regex)


def engine_metrics(settings: Settings) -> PrometheusEngineMetrics | None:
    """vLLM's metrics for the Services page, read from ``settings.prometheus_url`` with the per-query timeout
    ``HOTSPAN_PROMETHEUS_TIMEOUT_S``, the one diagnosis and the capacity score use; None without a URL."""
    if not settings.prometheus_url:
        return None
    return PrometheusEngineMetrics(settings.prometheus_url, timeout_s=settings.prometheus_timeout_s)


def capacity_service(settings: Settings) -> CapacityService:
    """The capacity score over ``settings.prometheus_url`` (``not_configured`` without one) with the configured
    TTFT SLO, sized rate and window."""
    source = (
        PrometheusMetricsSource(settings.prometheus_url, timeout_s=settings.prometheus_timeout_s)
        if settings.prometheus_url
        else None
    )
    capacity = CapacitySettings(
        ttft_slo_s=settings.capacity_ttft_slo_s,
        max_rate_per_s=settings.capacity_max_rate_per_s,
        window_s=settings.capacity_window_s,
    )
    return CapacityService(source, capacity)


def capacity_collector(settings: Settings, clock: Callable[[], float] = time.time) -> CapacityCollector:
    """The capacity score's ``/metrics`` collector over :func:`capacity_service`; ``clock`` (Unix seconds) ends
    the window."""
    return CapacityCollector(capacity_service(settings), clock=clock)


def open_slo_evaluator(config: AlertsConfig, query: QueryService) -> SloEvaluator:
    """The built-in SLO evaluator for ``config`` (not started), reading through ``query``: its alerts name the
    cause the query room's diagnosis names."""
    return SloEvaluator(config, query, diagnose=partial(diagnosis_annotations, query.diagnosis))


def open_anomaly_loop(
    settings: Settings, query: QueryService, alerts: AlertsConfig | None, http_port: int
) -> AnomalyLoop:
    """The anomaly loop (not started): the incident lifecycle fed by ``query``'s anomaly scores (its series,
    traces, service graph and diagnosis) with the ``HOTSPAN_ANOMALY_*`` settings, writing ``query``'s incident store
    and sending incidents where ``HOTSPAN_ANOMALY_ALERTMANAGER_URL`` / ``_WEBHOOK_URL`` say, else where the SLO file
    ``alerts`` sends its alerts; links point at the SLO file's ``external_url``, else at this server (bound to
    ``http_port``)."""
    detector = AnomalyDetector(
        query.incident_store,
        query.store,
        query.store,
        query.diagnosis,
        AnomalySettings(
            baseline_minutes=settings.anomaly_baseline_minutes,
            min_calls=settings.anomaly_min_calls,
            settle_s=settings.anomaly_settle_s,
            findings=settings.anomaly_findings,
        ),
    )
    alertmanager = settings.anomaly_alertmanager_url or (alerts.alertmanager_url if alerts else None)
    webhook = settings.anomaly_webhook_url or (alerts.webhook_url if alerts else None)
    external_url = alerts.external_url if alerts else f"http://{settings.host}:{http_port}"
    return AnomalyLoop(
        detector,
        query.incident_store,
        build_notifiers(alertmanager, webhook, external_url),
        interval_s=settings.anomaly_interval_s,
        external_url=external_url,
    )


def open_trace_pipeline(
    storage: Storage,
    config: TracePipelineConfig,
    processors: Sequence[TraceProcessor] = (),
    sampling_metrics: TailSamplingMetrics | None = None,
    split: tuple[int, int] = (0, 1),
    metrics: TracePipelineMetrics | None = None,
) -> TracePipeline:
    """The trace pipeline (``processors.pipeline``) over ``storage``, running ``processors`` on its ``split``
    (i, N) of the traces (``Settings.pipeline_split``; every trace by default) and, when ``config`` has policies,
    tail sampling (its decisions counted in ``sampling_metrics``); its first shard keeps the dependency rollup
    (``storage.dependency_rollup``); skipped traces count in ``metrics``; not started."""
    shard, shards = split
    sampler = TailSampler(config.tail_sampling, sampling_metrics) if config.tail_sampling is not None else None
    rollup = DependencyRollup(storage.clickhouse, margin_s=config.visibility_margin_s) if shard == 0 else None
    return TracePipeline(
        ClickHouseAnalysisStore(storage.clickhouse, STAGES),
        storage.reader,
        config,
        processors,
        sampler=sampler,
        dependency_rollup=rollup,
        metrics=metrics,
        shard=shard,
        shards=shards,
    )


def create_app(settings: Settings, storage: Storage, auth: Auth | None = None) -> FastAPI:
    """The HTTP application of ``settings.role`` (``hotspan.roles``): ``/metrics``, ``/healthz`` and ``/docs``
    always; ``/v1/traces`` with ingest; ``/api/v1/...``, the Jaeger APIs, the MCP server at ``/mcp`` and the UI at
    ``/ui`` with query.
    Starts the ingest pipeline (``app.state.pipeline``, None without ingest) and the storage probe
    (``app.state.health``); whoever serves the app stops them. ``app.state.query`` is the query room (None without
    query), ``app.state.trace_processors`` what the trace pipeline runs (empty without pipeline).

    Every request passes ``hotspan.auth``'s middleware first (``auth``; loaded from ``settings`` when omitted).

    Raises:
        hotspan.auth.AuthFileError: the auth file is missing or invalid.
    """
    parts = PARTS[settings.role]
    app = FastAPI(
        title="Hotspan",
        version="0.1.0",
        description="Trace analysis for LLM agent stacks. Times are ns unless a field name says otherwise.",
        # Served by install_docs from local assets instead of FastAPI's CDN-loading pages.
        docs_url=None,
        redoc_url=None,
    )
    install_docs(app)
    protect_app(app, auth or load_auth(settings))
    install_error_handlers(app)
    app.state.metrics_registry = metrics_routes.new_registry()
    metrics_routes.record_role(app.state.metrics_registry, settings.role)
    # Not on the registry: /metrics writes their families in parts (hotspan.metrics), far less memory per scrape.
    trace_metrics = TraceMetrics(None, settings.cardinality_limit) if parts.pipeline else None
    parted = [trace_metrics] if trace_metrics is not None else []
    app.include_router(metrics_routes.build_router(app.state.metrics_registry, parted))
    app.state.pipeline = _mount_ingest(app, settings) if parts.ingest else None
    app.state.query = _mount_query(app, settings, storage) if parts.query else None
    # The trace pipeline (started by server.py) runs these on every batch.
    app.state.trace_processors = trace_processors(storage, trace_metrics) if trace_metrics is not None else []
    app.state.tail_sampling_metrics = TailSamplingMetrics(app.state.metrics_registry) if parts.pipeline else None
    app.state.trace_pipeline_metrics = TracePipelineMetrics(app.state.metrics_registry) if parts.pipeline else None
    if settings.prometheus_url and parts.query:
        # The same scores the REST API and the Services page read.
        app.state.metrics_registry.register(CapacityCollector(app.state.query.capacity))

    app.state.health = StorageProbe(
        lambda: ClickHouse(settings.clickhouse_dsn, settings.clickhouse_database, settings.layout)
    )
    app.state.health.start()

    _route_health(app, app, settings)
    return app


def create_admin_app(app: FastAPI, settings: Settings) -> FastAPI:
    """The admin listener's application (``HOTSPAN_ADMIN_PORT``): ``/healthz`` only, answered from ``app``'s
    state (its storage probe and ingest pipeline), the same answer as ``app``'s own ``/healthz``. No auth: health
    is public on the main port too."""
    admin = FastAPI(title="Hotspan admin", docs_url=None, redoc_url=None, openapi_url=None)
    _route_health(admin, app, settings)
    return admin


def _route_health(target: FastAPI, app: FastAPI, settings: Settings) -> None:
    """``GET /healthz`` on ``target``, reporting ``app``'s storage probe and ingest pipeline."""

    @target.get("/healthz", operation_id="health", response_model=Health, tags=["service"])
    async def health() -> Health:
        """Liveness and storage reachability, from the background probe's last answer (``hotspan.health``):
        answered at once, whatever else the server is doing; and the process's role."""
        reachable, detail = app.state.health.storage()
        ingest = app.state.pipeline
        if reachable and ingest is not None and not ingest.inserting_ok:
            reachable, detail = False, f"inserts failing; {ingest.spooled_spans} spans wait in the spool"
        dead = ingest.dead_letters.spans if ingest is not None else 0
        return Health(
            status="ok" if reachable else "degraded", storage=detail, role=settings.role, dead_letter_spans=dead
        )


def _mount_ingest(app: FastAPI, settings: Settings) -> IngestPipeline:
    """The OTLP/HTTP receiver on ``app`` and its started ingest pipeline (``app.state.ingest_metrics`` set too)."""
    app.state.ingest_metrics = IngestMetrics(app.state.metrics_registry)
    pipeline = open_pipeline(settings, app.state.ingest_metrics)
    app.include_router(
        http_receiver.build_router(
            pipeline,
            app.state.ingest_metrics,
            settings.max_body_bytes,
            body_read_timeout_s=settings.body_read_timeout_s,
            max_request_spans=settings.max_request_spans,
            decode_wait_s=settings.decode_wait_s,
        )
    )
    return pipeline


def _mount_query(app: FastAPI, settings: Settings, storage: Storage) -> QueryService:
    """The REST, Jaeger and Tempo APIs, the MCP server and the UI on ``app``, all reading through one query room,
    which is returned."""
    # The query room: every read of the REST API and the UI goes through it (and the SLO evaluator's, server.py).
    query = open_query(settings, storage)
    trace_reads = TraceReadLimits(settings.max_trace_spans, app.state.metrics_registry)
    # Every read route runs on threads of its own, a few at a time, off the loop that answers OTLP (api.read_pool).
    reads = app.state.reads = ReadPool(settings.read_workers, settings.read_queue, settings.retry_after_s)
    app.include_router(traces_api.build_router(query, trace_reads, reads))
    app.include_router(trace_page_api.build_router(query.views, reads))
    app.include_router(jaeger_v1.build_router(query, trace_reads, reads))
    app.include_router(jaeger_v3.build_router(query, trace_reads, reads))
    app.include_router(tempo_api.build_router(query, trace_reads, reads))
    app.include_router(topology_api.build_router(query, reads))
    app.include_router(red_api.build_router(query, query.cardinality_limit, reads))
    app.include_router(diagnosis_api.build_router(query.diagnosis, reads))
    app.include_router(incidents_api.build_router(query, reads))
    app.include_router(analysis_api.build_router(query.analysis, reads))
    app.include_router(conversations_api.build_router(query.conversations, reads))
    app.include_router(throughput_latency_api.build_router(query, reads))
    app.include_router(capacity_api.build_router(query.capacity, reads))
    app.include_router(payloads_api.build_router(payload_store(settings), query, reads))
    # The MCP server for coding agents: the same query room, read pool and tenancy as the routes above.
    mount_mcp(app, query, reads, settings.host)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui/")

    dash_app = build_dash_app(query, requests_pathname_prefix="/ui/")
    # An unknown package or file under /ui/_dash-component-suites/ is a 404, not a 500 with a traceback.
    dash_app.server.register_error_handler(DependencyException, lambda exc: ("not found", 404))
    ui = WSGIMiddleware(dash_app.server)  # type: ignore[arg-type]
    guard = UiRequestGuard(
        ui,
        settings.ui_max_body_bytes,
        lambda: dash_app.callback_map,
        settings.read_workers,
        settings.read_queue,
        settings.retry_after_s,
    )
    app.mount("/ui", guard)
    return query
