"""The rows the pipeline stores for a batch of traces of one owner tenant, built columnar from one
:class:`~analysis.TraceAnalysis`: one Arrow table of span rows and one of trace summaries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from analysis import STAGE_COLUMNS, STAGES, TraceAnalysis, stage_breakdown_wide
from analysis.critical_path import own_critical_ns
from analysis.genai import TOKEN_COLUMNS
from analysis.model_calls import model_calls
from analysis.request_window import request_quality
from processors.pipeline.flame import span_nodes
from storage.analysis_store import SPAN_ANALYSIS_SCHEMA, TRACE_SUMMARY_SCHEMA


@dataclass(frozen=True)
class DerivedRows:
    """What one batch writes: ``spans`` (``storage.analysis_store.SPAN_ANALYSIS_SCHEMA``) and ``summaries``
    (``TRACE_SUMMARY_SCHEMA``)."""

    spans: pa.Table
    summaries: pa.Table


def span_stages(analysis: TraceAnalysis) -> np.ndarray:
    """Per span, its stage index into :data:`analysis.STAGES`: the rule's stage, or for a tiled span (vLLM
    phases, an untraced LLM call split at its first token, a request carrying one) the stage of the piece
    holding most of its own time (so an ``llm_request`` reads ``llm.decode`` rather than the rule's fallback,
    and a model call promoted to an envelope's root its phases, not the ``other`` around it:
    ``TraceAnalysis.own_intervals``)."""
    stage = analysis.assignment.stage.copy()
    pieces = analysis.pieces
    if pieces.tiled.size:
        length = pieces.end_ns - pieces.start_ns
        own_start, own_end = (own[pieces.span] for own in analysis.own_intervals)
        of_tiled = np.isin(pieces.span, pieces.tiled) & (pieces.start_ns >= own_start) & (pieces.end_ns <= own_end)
        # Longest piece per span: sort by (span, length) and take each span's last row; ties go to the earlier piece.
        order = np.lexsort((-np.arange(pieces.span.size), length, pieces.span))
        order = order[of_tiled[order]]
        last = np.r_[pieces.span[order][1:] != pieces.span[order][:-1], True]
        stage[pieces.span[order][last]] = pieces.stage[order][last]
    return stage


def derive_rows(
    analysis: TraceAnalysis,
    owner: str,
    flags: pl.DataFrame,
    arrived_spans: Mapping[str, int],
    version: int,
) -> DerivedRows:
    """Span rows and trace summaries of every trace in ``analysis``.

    Args:
        analysis: the analysis of the batch's spans (all of one owner tenant).
        owner: their owner tenant (``storage.tenancy``), stored in ``Tenant``.
        flags: :func:`processors.pipeline.hotspots.hotspot_flags` of ``analysis.tree.spans``, row for row.
        arrived_spans: per trace ID, the arrived span count the analysis covers (``AnalysedSpans``).
        version: the rows' version (higher supersedes; the pipeline uses a ns clock).
    """
    tree = analysis.tree
    spans = tree.spans
    sections = analysis.sections
    # Durations and sections as analysis.span_attributions takes them (each span's own interval), without that
    # function's wall-clock view (not stored).
    own_start, own_end = analysis.own_intervals
    critical_ns = own_critical_ns(sections, own_start, own_end)
    wide = stage_breakdown_wide(analysis)
    request_tenant = wide["tenant"].fill_null("").to_numpy()
    node, parent_node = span_nodes(analysis)
    is_error = (
        (spans["status_code"] == "Error") if "status_code" in spans.columns else pl.repeat(False, tree.size, eager=True)
    )
    parent_ids = tree.frame()["parent_span_id"]
    calls = model_calls(analysis)
    call_rows = calls["index"].to_numpy()

    def per_span(values: pl.Series, empty: object, dtype: pa.DataType) -> pa.Array:
        """A model-call column spread over every span (``empty`` where a span is no call)."""
        column = np.full(tree.size, empty, dtype=object)
        column[call_rows] = values.to_numpy()
        return pa.array(column, dtype, from_pandas=True)

    tokens = {
        name: per_span(calls[column].fill_null(0).cast(pl.UInt64), 0, pa.uint64())
        for name, column in zip(
            ("InputTokens", "OutputTokens", "CachedInputTokens", "ReasoningTokens"), TOKEN_COLUMNS, strict=True
        )
    }
    span_rows = pa.table(
        {
            "Tenant": pa.repeat(pa.scalar(owner, pa.string()), tree.size),
            "Timestamp": pa.array(tree.start_ns, pa.int64()).cast(pa.timestamp("ns")),
            "TraceId": spans["trace_id"].to_arrow(),
            "SpanId": spans["span_id"].to_arrow(),
            "ParentSpanId": parent_ids.to_arrow(),
            "ServiceName": spans["service_name"].to_arrow(),
            "SpanName": spans["name"].to_arrow(),
            "SpanKind": spans["kind"].to_arrow(),
            "Stage": pa.array(np.asarray(STAGES, dtype=object)[span_stages(analysis)], pa.string()),
            "DurationNs": pa.array((own_end - own_start).astype(np.uint64)),
            "SelfTimeNs": pa.array(analysis.self_time_ns.astype(np.uint64)),
            "OnCriticalPath": pa.array(sections.on_path),
            "CriticalPathNs": pa.array(critical_ns.astype(np.uint64)),
            "Depth": pa.array(tree.depth.astype(np.uint32)),
            "FlameNode": pa.array(node),
            "FlameParent": pa.array(parent_node),
            "IsError": pa.array(pl.Series(is_error).fill_null(False).to_numpy()),
            "RequestTenant": pa.array(request_tenant[tree.trace], pa.string()),
            "IsHotspot": flags["is_hotspot"].to_arrow(),
            "HotspotReason": flags["reason"].to_arrow(),
            "HotspotThresholdMs": flags["threshold_ms"].cast(pl.Float64).to_arrow(),
            "Version": pa.array(np.full(tree.size, version, dtype=np.uint64)),
            "Model": per_span(calls["model"].fill_null(""), "", pa.string()),
            "LlmCall": per_span(calls["outermost"], False, pa.bool_()),
            **tokens,
            "TtftNs": per_span(calls["ttft_ns"].clip(lower_bound=0).cast(pl.UInt64), None, pa.uint64()),
        },
        schema=SPAN_ANALYSIS_SCHEMA,
    )
    hotspots = np.bincount(tree.trace, weights=flags["is_hotspot"].to_numpy(), minlength=tree.trace_count)
    stage_ns = wide.select(STAGE_COLUMNS).to_numpy().astype(np.uint64)
    present = stage_ns > 0
    # The map holds the stages with time only: readers see 0 for a missing key.
    stage_map = pa.MapArray.from_arrays(
        pa.array(np.r_[0, np.cumsum(present.sum(axis=1))].astype(np.int32)),
        pa.array(np.broadcast_to(np.asarray(STAGES, dtype=object), stage_ns.shape)[present], pa.string()),
        pa.array(stage_ns[present], pa.uint64()),
    )
    trace_ids = wide["trace_id"]
    # Per trace in trace order, as wide is (both read the tree's primary roots).
    quality = request_quality(analysis.reported_tree, tree, analysis.enveloped)
    summaries = pa.table(
        {
            "Tenant": pa.repeat(pa.scalar(owner, pa.string()), wide.height),
            "Timestamp": pa.array(wide["start_time_unix_nano"].to_numpy(), pa.int64()).cast(pa.timestamp("ns")),
            "TraceId": trace_ids.to_arrow(),
            "RootSpanId": wide["root_span_id"].to_arrow(),
            "RootService": wide["root_service"].to_arrow(),
            "RootName": wide["root_name"].to_arrow(),
            "DurationNs": wide["duration_ns"].cast(pl.UInt64).to_arrow(),
            "SpanCount": wide["span_count"].to_arrow(),
            "ServiceCount": wide["service_count"].to_arrow(),
            "ErrorCount": wide["error_count"].to_arrow(),
            "HotspotCount": pa.array(hotspots.astype(np.uint32)),
            "RequestTenant": wide["tenant"].fill_null("").to_arrow(),
            "Model": wide["model"].fill_null("").to_arrow(),
            "LlmCalls": wide["llm_calls"].cast(pl.UInt32).to_arrow(),
            "TtftNs": wide["ttft_ns"].cast(pl.UInt64).to_arrow(),
            "TpotNs": wide["tpot_ns"].cast(pl.Float64).to_arrow(),
            "StageNs": stage_map,
            "AnalysedSpans": trace_ids.replace_strict(dict(arrived_spans), return_dtype=pl.UInt64).to_arrow(),
            "Version": pa.array(np.full(wide.height, version, dtype=np.uint64)),
            "InputTokens": wide["input_tokens"].to_arrow(),
            "OutputTokens": wide["output_tokens"].to_arrow(),
            "CachedInputTokens": wide["cached_input_tokens"].to_arrow(),
            "ReasoningTokens": wide["reasoning_tokens"].to_arrow(),
            # Kept unless tail sampling decides otherwise (processors.pipeline.trace_pipeline).
            "Sampled": pa.repeat(pa.scalar(True), wide.height),
            "Enveloped": quality["envelope"].to_arrow(),
            "ParentlessSpans": quality["parentless_spans"].to_arrow(),
            "ReattachedSpans": quality["reattached_spans"].to_arrow(),
            "OutlivingSpans": quality["outliving_spans"].to_arrow(),
            "ExtendedSpans": quality["extended_spans"].to_arrow(),
            "ExtendedNs": quality["extended_ns"].cast(pl.UInt64).to_arrow(),
            "ImplausibleRoot": quality["implausible_root"].to_arrow(),
            "ConversationId": wide["conversation_id"].fill_null("").to_arrow(),
        },
        schema=TRACE_SUMMARY_SCHEMA,
    )
    return DerivedRows(span_rows, summaries)
