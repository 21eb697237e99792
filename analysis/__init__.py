"""Pure functions on span frames: span trees, self time, Jaeger UI's critical path, stages, the request's
stage decomposition (critical path and wall-clock views), TTFT/TPOT, and Jaeger-style trace statistics.

No I/O: every function takes a polars span frame (the contract is in :mod:`analysis.spans`; what
``storage.reader.ClickHouseTraceReader.trace`` returns, for one or many traces) or a prepared
:class:`SpanTree`/:class:`TraceAnalysis`, and returns polars frames. Times are Int64 **nanoseconds**
unless a column name says otherwise.
"""

from analysis.critical_path import critical_path, critical_path_by_span
from analysis.decomposition import (
    STAGE_COLUMNS,
    compare_attributions,
    data_quality,
    latency_percentiles,
    request_summary,
    span_attributions,
    stage_breakdown,
    stage_breakdown_wide,
    stage_percentiles,
    wall_clock_breakdown,
)
from analysis.self_time import self_time
from analysis.stage_rules import (
    STAGE_DTYPE,
    STAGES,
    StageRule,
    StageRules,
    StageRulesError,
    default_stage_rules,
    load_stage_rules,
)
from analysis.stages import assign_stages, stage_pieces
from analysis.statistics import trace_statistics
from analysis.trace_analysis import TraceAnalysis, analyze
from analysis.tree import SpanTree, build_tree, span_tree
from analysis.vllm import llm_calls

__all__ = [
    "STAGES",
    "STAGE_COLUMNS",
    "STAGE_DTYPE",
    "SpanTree",
    "StageRule",
    "StageRules",
    "StageRulesError",
    "TraceAnalysis",
    "analyze",
    "assign_stages",
    "build_tree",
    "compare_attributions",
    "critical_path",
    "critical_path_by_span",
    "data_quality",
    "default_stage_rules",
    "latency_percentiles",
    "llm_calls",
    "load_stage_rules",
    "request_summary",
    "self_time",
    "span_attributions",
    "span_tree",
    "stage_breakdown",
    "stage_breakdown_wide",
    "stage_percentiles",
    "stage_pieces",
    "trace_statistics",
    "wall_clock_breakdown",
]
