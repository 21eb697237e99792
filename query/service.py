"""The query room itself: one object holding every read-side service, built once per process and handed to the
REST API, the Dash UI and the SLO evaluator, so they read and assemble the same data the same way (Jaeger's
``querysvc`` is the model: its handlers, HTTP and gRPC, all call it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import polars as pl

from diagnosis import DiagnosisSettings
from processors.pipeline.config import TracePipelineConfig
from query.agents import WindowAgentGraph, window_agent_graph
from query.analysis_service import AnalysisService
from query.bounded_trace import BoundedTrace, read_bounded_trace, read_bounded_traces
from query.capacity import CapacityService
from query.conversations import ConversationService
from query.diagnosis import DiagnosisService
from query.span_sets import SpanSets, find_span_sets
from query.throughput_latency import Latency, Throughput, ThroughputLatency, throughput_latency
from query.topology import Topology, window_topology
from query.trace_explain import DEFAULT_MARGIN_NS, TraceExplanation, explain_trace
from query.trace_search import SearchResult, TraceSearch, search_traces
from query.trace_view_cache import TraceViews
from storage.analysis_store import AnalysisStore
from storage.engine_metrics import EngineMetricsReader
from storage.engine_reader import EngineReader, EngineWindow
from storage.incident_store import Incident, IncidentQuery, IncidentStore
from storage.reader import TraceCursor, TraceQuery, TraceReader
from storage.rollup_reader import EdgeScope, RedCounts, RedQuery, RedResult, RedSelection, RollupReader
from storage.rollup_sql import CARDINALITY_LIMIT


class Store(TraceReader, RollupReader, Protocol):
    """A store that answers trace and rollup reads (``storage.reader.ClickHouseTraceReader`` is one)."""


@dataclass(frozen=True)
class QueryService:
    """Every reader's one way to the data.

    The REST, Jaeger and Tempo routes and the UI's pages call its methods only; the store readers it holds
    (:attr:`store`, :attr:`incident_store`, :attr:`engines`, :attr:`engine_metrics`) are for the query room's own
    services and the background work built beside it (the incident lifecycle, the SLO evaluator), never for a
    handler (``tests/query/test_one_door.py``), so two handlers cannot read the same data two ways.

    Attributes:
        store: trace reads (services, operations, search, a trace, its pages, dependencies) and the RED and
            service-graph rollups; thread-safe, blocking.
        analysis: per-trace analysis and window aggregates (stages, hotspots, flame graphs, usage and cost).
        conversations: the conversations requests are turns of, with their stages, tokens and cost.
        views: the trace model a trace page and its REST route show, read once per page load and kept.
        diagnosis: named causes over a window, with the configured rules, stage table and engine metrics.
        incident_store: the incidents the incident lifecycle (:mod:`incidents.lifecycle`) opened and writes, and
            the series the anomaly scorer (:mod:`query.anomaly`) judges.
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
    incident_store: IncidentStore
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
            incident_store=incidents,
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

    def trace_pages(self, trace_ids: Sequence[str], *, tenant: str | None, limit: int) -> dict[str, BoundedTrace]:
        """:meth:`trace_page` from the first span of each of ``trace_ids`` (canonical 32 hex) in a few reads
        (:func:`query.bounded_trace.read_bounded_traces`); unknown IDs are absent. Blocking."""
        return read_bounded_traces(self.store, trace_ids, tenant=tenant, limit=limit)

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

    def search(self, search: TraceSearch, *, tenant: str | None) -> SearchResult:
        """Traces by span filters, whole-trace duration and a sort, each with its model use
        (:func:`query.trace_search.search_traces`): the REST search, the Search page and the MCP tool answer from
        it. Blocking.

        Raises:
            ValueError: a search :func:`~query.trace_search.search_traces` refuses.
        """
        return search_traces(self.store, self.analysis, search, tenant=tenant)

    def search_spans(self, query: TraceQuery, *, tenant: str | None) -> pl.DataFrame:
        """Every span of the traces ``query`` finds, newest traces first by the store's search, ordered by trace ID
        then span start (Jaeger's find-traces, v1 and v3). Blocking.

        Raises:
            query.store.ReadLimitError: the traces hold more spans than ``HOTSPAN_MAX_SEARCH_SPANS``.
        """
        return self.store.search_spans(query, tenant=tenant)

    def span_sets(
        self,
        query: TraceQuery,
        *,
        tenant: str | None,
        min_trace_duration_ns: int | None = None,
        max_trace_duration_ns: int | None = None,
        per_trace: int,
        keys: Sequence[str] = (),
    ) -> SpanSets:
        """The newest traces matching ``query`` within the whole-trace duration bounds (ns), with their first
        ``per_trace`` matching spans (:func:`query.span_sets.find_span_sets`; Tempo's search). Blocking."""
        return find_span_sets(
            self.store,
            query,
            tenant=tenant,
            min_trace_duration_ns=min_trace_duration_ns,
            max_trace_duration_ns=max_trace_duration_ns,
            per_trace=per_trace,
            keys=keys,
        )

    def tag_names(self, scope: str, start_ns: int, end_ns: int, *, tenant: str | None, limit: int) -> list[str]:
        """Attribute keys of ``scope`` (``span`` or ``resource``) on spans starting in ``[start_ns, end_ns]``,
        sorted, at most ``limit`` (Tempo's tag names). Blocking; ``ValueError`` for another scope."""
        return self.store.tag_names(scope, start_ns, end_ns, tenant=tenant, limit=limit)

    def tag_values(
        self, scope: str, name: str, start_ns: int, end_ns: int, *, tenant: str | None, limit: int
    ) -> list[str]:
        """Distinct values of one field (an attribute of ``scope`` ``span``/``resource``, or an ``intrinsic``) on
        spans starting in ``[start_ns, end_ns]``, sorted, at most ``limit`` (Tempo's tag values). Blocking;
        ``ValueError`` for another scope or intrinsic."""
        return self.store.tag_values(scope, name, start_ns, end_ns, tenant=tenant, limit=limit)

    def trace_size(self, trace_id: str, *, tenant: str | None) -> int:
        """Spans the tenant's trace ``trace_id`` (canonical 32 hex) holds, each once; 0 when unknown. Blocking."""
        return self.store.trace_size(trace_id, tenant=tenant)

    def edge_examples(
        self,
        client: str,
        server: str,
        start_ns: int,
        end_ns: int,
        *,
        tenant: str | None,
        limit: int = 10,
        scope: EdgeScope | None = None,
    ) -> pl.DataFrame:
        """Traces with a call ``client → server`` (in ``scope`` when given) starting in ``[start_ns, end_ns]``,
        failed calls first, then the slowest, at most ``limit``
        (:meth:`storage.rollup_reader.RollupReader.edge_examples` columns). Blocking."""
        return self.store.edge_examples(client, server, start_ns, end_ns, tenant=tenant, limit=limit, scope=scope)

    def rollup_time_range(self, *, tenant: str | None) -> tuple[int, int] | None:
        """``(start of the first minute, end of the last minute)`` of the tenant's rollups holding spans, ns; None
        when there are none (what a lookback of "all" spans). Blocking."""
        return self.store.rollup_time_range(tenant=tenant)

    def red_counts(self, selection: RedSelection, start_ns: int, end_ns: int, *, tenant: str | None) -> RedCounts:
        """Calls, errors and latency buckets of ``selection`` over ``[start_ns, end_ns)`` from the RED rollup (the
        SLO evaluator's span ratios; :meth:`storage.rollup_reader.RollupReader.red_counts`). Blocking."""
        return self.store.red_counts(selection, start_ns, end_ns, tenant=tenant)

    def stage_counts(
        self, service: str, stage: str, threshold_ns: int, start_ns: int, end_ns: int, *, tenant: str | None
    ) -> tuple[int, int]:
        """``(requests, requests whose stage time exceeds threshold_ns)`` of ``service``'s requests over ``[start_ns,
        end_ns)`` (the SLO evaluator's stage ratios; :meth:`storage.rollup_reader.RollupReader.stage_counts`).
        Blocking."""
        return self.store.stage_counts(service, stage, threshold_ns, start_ns, end_ns, tenant=tenant)

    def trace_ids(self, query: TraceQuery, *, tenant: str | None) -> list[str]:
        """The IDs (32 hex) of the newest traces ``query`` finds, at most ``query.limit`` (an alert's example
        traces). Blocking."""
        return [str(trace_id) for trace_id in self.store.search(query, tenant=tenant)["trace_id"].to_list()]

    def incidents(self, query: IncidentQuery, *, tenant: str | None) -> list[Incident]:
        """The tenant's incidents ``query`` selects, as the incident lifecycle wrote them. Blocking."""
        return self.incident_store.incidents(query, tenant=tenant)

    def engine_series(self, start_ns: int, end_ns: int, step_s: int) -> pl.DataFrame | None:
        """vLLM's engine metrics over ``[start_ns, end_ns]`` every ``step_s`` seconds
        (:meth:`storage.engine_metrics.EngineMetricsReader.engine_series` columns); None without
        ``HOTSPAN_PROMETHEUS_URL``. Blocking; raises ``query.store.PrometheusError`` when Prometheus fails."""
        return None if self.engine_metrics is None else self.engine_metrics.engine_series(start_ns, end_ns, step_s)
