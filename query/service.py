"""The query room itself: one object holding every read-side service, built once per process and handed to the
REST API, the Dash UI and the SLO evaluator, so they read and assemble the same data the same way (Jaeger's
``querysvc`` is the model: its handlers, HTTP and gRPC, all call it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from diagnosis import DiagnosisSettings
from processors.pipeline.config import TracePipelineConfig
from query.agents import WindowAgentGraph, window_agent_graph
from query.analysis_service import AnalysisService
from query.bounded_trace import BoundedTrace, read_bounded_trace
from query.capacity import CapacityService
from query.conversations import ConversationService
from query.diagnosis import DiagnosisService
from query.throughput_latency import Latency, Throughput, ThroughputLatency, throughput_latency
from query.topology import Topology, window_topology
from query.trace_explain import DEFAULT_MARGIN_NS, TraceExplanation, explain_trace
from query.trace_view_cache import TraceViews
from storage.analysis_store import AnalysisStore
from storage.engine_metrics import EngineMetricsReader
from storage.engine_reader import EngineReader, EngineWindow
from storage.incident_store import IncidentStore
from storage.reader import TraceCursor, TraceQuery, TraceReader
from storage.rollup_reader import EdgeScope, RedQuery, RedResult, RollupReader
from storage.rollup_sql import CARDINALITY_LIMIT


class Store(TraceReader, RollupReader, Protocol):
    """A store that answers trace and rollup reads (``storage.reader.ClickHouseTraceReader`` is one)."""


@dataclass(frozen=True)
class QueryService:
    """Every reader's one way to the data.

    Attributes:
        store: trace reads (services, operations, search, a trace, its pages, dependencies) and the RED and
            service-graph rollups; thread-safe, blocking.
        analysis: per-trace analysis and window aggregates (stages, hotspots, flame graphs, usage and cost).
        conversations: the conversations requests are turns of, with their stages, tokens and cost.
        views: the trace model a trace page and its REST route show, read once per page load and kept.
        diagnosis: named causes over a window, with the configured rules, stage table and engine metrics.
        incidents: the incidents the incident lifecycle (:mod:`incidents.lifecycle`) opened, and the series the
            anomaly scorer (:mod:`query.anomaly`) judges.
        engines: vLLM's ``llm_request`` spans grouped by engine configuration (the throughput-latency view).
        engine_metrics: vLLM's metrics for the Services page; None without ``HOTSPAN_PROMETHEUS_URL``.
        capacity: the capacity health score per engine and service (the API, the Services page and ``/metrics``);
            one reporting ``not_configured`` without ``HOTSPAN_PROMETHEUS_URL``.
        cardinality_limit: most groups of a RED read and edges of a topology read the API and the UI make (the
            rest fold into one overflow row), ``HOTSPAN_CARDINALITY_LIMIT``.
    """

    store: Store
    analysis: AnalysisService
    conversations: ConversationService
    views: TraceViews
    diagnosis: DiagnosisService
    incidents: IncidentStore
    engines: EngineReader
    engine_metrics: EngineMetricsReader | None = None
    capacity: CapacityService = field(default_factory=lambda: CapacityService(None))
    cardinality_limit: int = CARDINALITY_LIMIT

    @classmethod
    def build(
        cls,
        store: Store,
        analysis_store: AnalysisStore,
        engines: EngineReader,
        config: TracePipelineConfig,
        diagnosis: DiagnosisSettings,
        incidents: IncidentStore,
        engine_metrics: EngineMetricsReader | None = None,
        capacity: CapacityService | None = None,
        cardinality_limit: int = CARDINALITY_LIMIT,
    ) -> QueryService:
        """The room over one store, with the pipeline's configuration (stage rules, prices) and the diagnosis
        settings, so every reader shares them."""
        analysis = AnalysisService(store, analysis_store, config)
        return cls(
            store=store,
            analysis=analysis,
            conversations=ConversationService(analysis_store, analysis),
            views=TraceViews(store, config.stage_rules, max_read_spans=config.max_trace_spans),
            diagnosis=DiagnosisService(store, diagnosis, config.stage_rules),
            incidents=incidents,
            engines=engines,
            engine_metrics=engine_metrics,
            capacity=capacity or CapacityService(None),
            cardinality_limit=cardinality_limit,
        )

    def services(self, *, tenant: str | None) -> list[str]:
        """Names of the services that sent spans, sorted. Blocking."""
        return self.store.services(tenant=tenant)

    def operations(self, service: str, *, tenant: str | None) -> list[tuple[str, str]]:
        """``(span name, span kind)`` pairs seen for ``service``, sorted; empty for an unknown service. Blocking."""
        return self.store.operations(service, tenant=tenant)

    def dependencies(self, start_ns: int, end_ns: int, *, tenant: str | None) -> list[tuple[str, str, int]]:
        """``(parent service, child service, calls)`` over the parent-to-child span pairs across services of spans
        starting in ``[start_ns, end_ns]`` (Jaeger's dependencies). Blocking."""
        return self.store.dependencies(start_ns, end_ns, tenant=tenant)

    def red(self, query: RedQuery, *, tenant: str | None) -> RedResult:
        """Rate, errors and duration of ``query`` from the per-minute RED rollup: totals and per-step series per
        group, at most ``query.limit`` groups. Blocking."""
        return self.store.red(query, tenant=tenant)

    def trace_page(
        self, trace_id: str, *, tenant: str | None, limit: int, after: TraceCursor | None = None
    ) -> BoundedTrace:
        """Trace ``trace_id`` (canonical 32 hex) read by ID, at most ``limit`` spans after ``after``, with the
        trace's span count when that is not all of it (:func:`query.bounded_trace.read_bounded_trace`). Blocking."""
        return read_bounded_trace(self.store, trace_id, tenant=tenant, limit=limit, after=after)

    def agent_graph(self, query: TraceQuery, *, tenant: str | None) -> WindowAgentGraph:
        """The agent graph summed over the traces ``query`` finds (:func:`query.agents.window_agent_graph`).
        Blocking."""
        return window_agent_graph(self.store, self.views.rules, query, tenant=tenant)

    def topology(self, start_ns: int, end_ns: int, *, tenant: str | None, scope: EdgeScope | None = None) -> Topology:
        """The service graph over ``[start_ns, end_ns]``, of ``scope``'s calls when given, at most
        :attr:`cardinality_limit` edges (:func:`query.topology.window_topology`)."""
        return window_topology(self.store, start_ns, end_ns, tenant=tenant, scope=scope, limit=self.cardinality_limit)

    def explain_trace(
        self, trace_id: str, *, tenant: str | None, margin_ns: int = DEFAULT_MARGIN_NS
    ) -> TraceExplanation | None:
        """Why the request ``trace_id`` (canonical 32 hex) was slow: its stages, critical path and the diagnosis of
        the requests within ``margin_ns`` of it (:func:`query.trace_explain.explain_trace`); None when the tenant has
        no span of it. Blocking."""
        return explain_trace(self.views, self.diagnosis, trace_id, tenant=tenant, margin_ns=margin_ns)

    def throughput_latency(
        self,
        window: EngineWindow,
        *,
        throughput: Throughput = "requests_per_s",
        latency: Latency = "e2e_p95_ms",
        tenant: str | None,
    ) -> ThroughputLatency:
        """Each engine configuration's throughput against its latency per bucket of ``window``, with the Pareto
        frontier of (``throughput`` up, ``latency`` down) marked (:func:`query.throughput_latency.throughput_latency`).
        Blocking; raises ``ValueError`` for an unknown objective."""
        return throughput_latency(self.engines, window, throughput=throughput, latency=latency, tenant=tenant)
