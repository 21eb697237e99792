"""What of the store its readers may name: the read protocols, query types, limits, errors and ids that the REST
API, the Dash UI and the alerts pass to and get from :class:`query.service.QueryService`'s readers.

They are defined in ``storage/``, beside the SQL they parameterise; ``api/``, ``dashboards/`` and ``alerts/`` name
them from here and import nothing of ``storage`` themselves (an import-linter ``forbidden`` contract in
``pyproject.toml``), so every read they make goes through the query room, as Jaeger's handlers reach its span
store only through ``querysvc``.
"""

from __future__ import annotations

from storage.analysis_store import AnalysisFilter, ConversationFilter
from storage.clickhouse import ReadLimitError, StorageError
from storage.conversation_sql import ConversationOrder
from storage.engine_metrics import EngineMetricsReader
from storage.engine_reader import EngineWindow
from storage.ids import IdError, normalize_trace_id, short_trace_id
from storage.incident_store import Incident, IncidentQuery, IncidentStore
from storage.payloads import PayloadStore
from storage.prometheus import PrometheusError
from storage.reader import MAX_ATTRIBUTE_FILTERS, MAX_TRACE_SPANS, TraceCursor, TraceQuery, TraceReader
from storage.rollup_reader import EdgeScope, RedCounts, RedQuery, RedSelection, RollupReader
from storage.rollup_sql import SPAN_BUCKETS_MS
from storage.schema import SPAN_KINDS, STATUS_CODES
from storage.tenancy import DEFAULT_TENANT, TENANT_NAME, tenancy_of
from storage.traceql import (
    Comparison,
    Field,
    Operator,
    SpanAnd,
    SpanCondition,
    SpanOr,
    Spanset,
    SpansetOp,
    SpansetQuery,
    Value,
)
from storage.traceql_sql import QueryTooLarge, span_condition

__all__ = [
    "DEFAULT_TENANT",
    "MAX_ATTRIBUTE_FILTERS",
    "MAX_TRACE_SPANS",
    "SPAN_BUCKETS_MS",
    "SPAN_KINDS",
    "STATUS_CODES",
    "TENANT_NAME",
    "AnalysisFilter",
    "Comparison",
    "ConversationFilter",
    "ConversationOrder",
    "EdgeScope",
    "EngineMetricsReader",
    "EngineWindow",
    "Field",
    "IdError",
    "Incident",
    "IncidentQuery",
    "IncidentStore",
    "Operator",
    "PayloadStore",
    "PrometheusError",
    "QueryTooLarge",
    "ReadLimitError",
    "RedCounts",
    "RedQuery",
    "RedSelection",
    "RollupReader",
    "SpanAnd",
    "SpanCondition",
    "SpanOr",
    "Spanset",
    "SpansetOp",
    "SpansetQuery",
    "StorageError",
    "TraceCursor",
    "TraceQuery",
    "TraceReader",
    "Value",
    "normalize_trace_id",
    "short_trace_id",
    "span_condition",
    "tenancy_of",
]
