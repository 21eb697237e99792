"""Where a request's time went, by stage, in two views, and their percentiles over many requests.

A *request* is a trace; its end-to-end latency is the duration of its window: the trace's root span
(``SpanTree.primary_root``) in the analysis tree, where every other parentless span is the root's child and the
root's window is the envelope of the trace's spans when the root is missing or never ended
(:mod:`analysis.request_window`; :func:`data_quality` says which).

Two attributions, each summing to the root's duration:

- **critical path** (:func:`stage_breakdown`, :func:`stage_breakdown_wide`): every critical-path section
  (:mod:`analysis.critical_path`, Jaeger UI's semantics) goes to the stage of the span it belongs to; a
  vLLM ``llm_request`` section goes to the phases it overlaps (:mod:`analysis.vllm`). Parallel work off the
  path counts nothing. Integer ns, exact.
- **wall clock** (:func:`wall_clock_breakdown`): each instant is split among the deepest spans active then
  (:mod:`analysis.wall_clock`), as a sampling profiler would. Float64 ns.

They disagree where the path's last-finishing-child rule picks a different child than where the deepest
work is, e.g. a childless wrapper sibling ending after the real work; :func:`compare_attributions` lists
those stages. :func:`request_summary` adds per request the root, tenant, model, TTFT and TPOT;
:func:`stage_percentiles` and :func:`latency_percentiles` summarise a window of requests.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import polars as pl

from analysis import vllm
from analysis.conversation import conversation_key
from analysis.critical_path import own_critical_ns
from analysis.genai import TOKEN_COLUMNS
from analysis.model_calls import model_calls
from analysis.request_window import quality_notes, request_quality
from analysis.spans import attribute
from analysis.stage_rules import STAGE_DTYPE, STAGES, StageRules, stage_series
from analysis.trace_analysis import TraceAnalysis, analyze
from analysis.tree import SpanTree

TENANT_KEYS = ("tenant_id", "tenant.id")
"""Span attributes naming the tenant: ``tenant_id`` is the W3C baggage key Hotspan's SDK copies onto spans."""
STAGE_COLUMNS = tuple(f"{stage}_ns" for stage in STAGES)
"""Columns of the wide breakdown, one per stage, in :data:`~analysis.stage_rules.STAGES` order."""
PERCENTILES = (0.5, 0.95, 0.99)
DISAGREEMENT_SHARE = 0.05
"""Default of :func:`compare_attributions`: a stage's two views disagree when they differ by at least this
share of the request's latency; below it, the difference does not change which stages dominate."""

Spans = pl.DataFrame | SpanTree | TraceAnalysis


def _critical_path_credit(analysis: TraceAnalysis) -> tuple[npt.NDArray, npt.NDArray, npt.NDArray]:
    """Critical-path ns credited per (span index, stage index), root trees only, as three aligned arrays.

    A section goes whole to its span's stage, except on a tiled span (vLLM phases, an untraced LLM call split
    at its first token, a request carrying such a call), where it is cut at the piece boundaries.
    """
    tree, sections = analysis.tree, analysis.sections
    primary = tree.in_primary_tree[sections.span]
    span, start, end = sections.span[primary], sections.start_ns[primary], sections.end_ns[primary]
    which, stage, low, high = analysis.pieces.cut(span, start, end)
    return span[which], stage, high - low


def _per_trace_stage(trace_of: npt.NDArray, stage: npt.NDArray, value: npt.NDArray, traces: int) -> npt.NDArray:
    totals = np.zeros((traces, len(STAGES)), dtype=value.dtype)
    np.add.at(totals, (trace_of, stage), value)
    return totals


def _long(analysis: TraceAnalysis, totals: npt.NDArray) -> pl.DataFrame:
    trace_index, stage_index = np.nonzero(totals)
    trace_ids = analysis.tree.spans["trace_id"].gather(analysis.tree.primary_root)
    return pl.DataFrame(
        {
            "trace_id": trace_ids.gather(trace_index),
            "stage": stage_series(stage_index),
            "duration_ns": totals[trace_index, stage_index],
        }
    )


def _critical_path_totals(analysis: TraceAnalysis) -> npt.NDArray[np.int64]:
    span, stage, credit = _critical_path_credit(analysis)
    return _per_trace_stage(analysis.tree.trace[span], stage, credit, analysis.tree.trace_count)


def _wall_clock_totals(analysis: TraceAnalysis) -> npt.NDArray[np.float64]:
    shares = analysis.wall_clock
    return _per_trace_stage(analysis.tree.trace[shares.span], shares.stage, shares.share_ns, analysis.tree.trace_count)


def stage_breakdown(spans: Spans, rules: StageRules | None = None) -> pl.DataFrame:
    """Critical-path view: per request, ns of its critical path in each stage.

    Args:
        spans: a span frame (contract in :mod:`analysis.spans`), a SpanTree or a TraceAnalysis.
        rules: stage rules; default the packaged table.

    Returns:
        trace_id (String), stage (:data:`~analysis.stage_rules.STAGE_DTYPE`), duration_ns (Int64 ns); one
        row per request and stage with a non-zero share, sorted by trace_id then stage. Per trace the
        durations sum exactly to the root span's duration.
    """
    analysis = analyze(spans, rules)
    return _long(analysis, _critical_path_totals(analysis))


def wall_clock_breakdown(spans: Spans, rules: StageRules | None = None) -> pl.DataFrame:
    """Wall-clock profiler view: per request, ns of its root interval in each stage, each instant split
    among the deepest active spans.

    Returns:
        trace_id (String), stage (STAGE_DTYPE), duration_ns (Float64 ns); rows with a non-zero share, sorted
        by trace_id then stage. Per trace the durations sum to the root span's duration (float rounding).
    """
    analysis = analyze(spans, rules)
    return _long(analysis, _wall_clock_totals(analysis))


def request_summary(spans: Spans, rules: StageRules | None = None) -> pl.DataFrame:
    """One row per request (trace) with what the aggregated views group and filter by.

    Returns:
        trace_id, root_span_id, root_service, root_name (String); start_time_unix_nano (Int64 ns since the
        epoch, the root's start); duration_ns (Int64, the root's duration: the request's e2e latency);
        span_count, service_count, error_count (UInt32; errors = spans with status_code ``Error`` when the
        frame has that column); tenant (String, first of :data:`TENANT_KEYS` on the earliest span carrying
        one); model (String, the model of the earliest model call naming one, else ``gen_ai.request.model``/
        ``gen_ai.response.model`` of the earliest span carrying one); llm_calls (UInt32, the model calls the
        request made: outermost calls, :func:`analysis.model_calls.model_calls`); ttft_ns (Int64, time to first
        token of the earliest call that reports one: the first answer the request waited for); tpot_ns
        (Float64, time after the first token over tokens after the first, summed over the request's
        generations: a token-weighted mean of vLLM's per-call TPOT); input_tokens, output_tokens,
        cached_input_tokens, reasoning_tokens (UInt64, summed over the generations, each counted once; 0
        without); conversation_id (String, the conversation the request is a turn of,
        :func:`analysis.conversation.conversation_key` of the earliest span naming one; null without). Sorted by
        trace_id.
    """
    analysis = analyze(spans, rules)
    tree = analysis.tree
    frame = tree.spans
    root = tree.primary_root
    errors = (pl.col("status_code") == "Error") if "status_code" in frame.columns else pl.lit(False)
    per_trace = frame.group_by("trace_id", maintain_order=True).agg(
        pl.len().cast(pl.UInt32).alias("span_count"),
        pl.col("service_name").n_unique().cast(pl.UInt32).alias("service_count"),
        errors.sum().cast(pl.UInt32).alias("error_count"),
        pl.coalesce(*(attribute(key) for key in TENANT_KEYS)).drop_nulls().first().alias("tenant"),
        pl.coalesce(*(attribute(key) for key in vllm.MODEL)).drop_nulls().first().alias("span_model"),
        conversation_key(frame).drop_nulls().first(),
    )
    calls = model_calls(analysis).sort("trace_id", "start_ns")
    timed = pl.col("stream_ns").is_not_null() & (pl.col("output_tokens") >= 2)
    llm = calls.group_by("trace_id").agg(
        pl.col("outermost").sum().cast(pl.UInt32).alias("llm_calls"),
        pl.col("model").drop_nulls().first().alias("call_model"),
        pl.col("ttft_ns").drop_nulls().first().alias("ttft_ns"),
        (
            pl.col("stream_ns").filter(timed).sum().cast(pl.Float64) / (pl.col("output_tokens") - 1).filter(timed).sum()
        ).alias("tpot_ns"),
        *(pl.col(name).sum().cast(pl.UInt64).alias(name) for name in TOKEN_COLUMNS),
    )
    roots = pl.DataFrame(
        {
            "trace_id": frame["trace_id"].gather(root),
            "root_span_id": frame["span_id"].gather(root),
            "root_service": frame["service_name"].gather(root),
            "root_name": frame["name"].gather(root),
            "start_time_unix_nano": tree.start_ns[root],
            "duration_ns": tree.end_ns[root] - tree.start_ns[root],
        }
    )
    return (
        roots.join(per_trace, on="trace_id", how="left", maintain_order="left")
        .join(llm, on="trace_id", how="left", maintain_order="left")
        .with_columns(
            pl.coalesce("call_model", "span_model").alias("model"),
            pl.col("llm_calls").fill_null(0),
            pl.when(pl.col("tpot_ns").is_finite()).then(pl.col("tpot_ns")).alias("tpot_ns"),
            *(pl.col(name).fill_null(0) for name in TOKEN_COLUMNS),
        )
        .select(
            "trace_id",
            "root_span_id",
            "root_service",
            "root_name",
            "start_time_unix_nano",
            "duration_ns",
            "span_count",
            "service_count",
            "error_count",
            "tenant",
            "model",
            "llm_calls",
            "ttft_ns",
            "tpot_ns",
            *TOKEN_COLUMNS,
            "conversation_id",
        )
    )


def data_quality(spans: Spans, rules: StageRules | None = None) -> pl.DataFrame:
    """Per request, what its window rests on, and the data-quality line a reader should see beside its numbers.

    Returns:
        The columns of :func:`analysis.request_window.request_quality`, then notes (List(String): one sentence
        per concern, :func:`analysis.request_window.quality_notes`; empty when the window is the root's own and
        no span was re-attached). One row per trace, sorted by trace_id.
    """
    analysis = analyze(spans, rules)
    quality = request_quality(analysis.reported_tree, analysis.tree, analysis.enveloped)
    notes = [quality_notes(row) for row in quality.iter_rows(named=True)]
    return quality.with_columns(pl.Series("notes", notes, dtype=pl.List(pl.String)))


def stage_breakdown_wide(spans: Spans, rules: StageRules | None = None) -> pl.DataFrame:
    """Critical-path view, one row per request: :func:`request_summary` plus one column per stage.

    Returns:
        The columns of :func:`request_summary`, then :data:`STAGE_COLUMNS` (``network_ns`` ...
        ``other_ns``, Int64 ns, zero where the stage is absent), which sum exactly to ``duration_ns``.
    """
    analysis = analyze(spans, rules)
    totals = _critical_path_totals(analysis)
    stages = pl.DataFrame({name: totals[:, i] for i, name in enumerate(STAGE_COLUMNS)})
    return pl.concat([request_summary(analysis), stages], how="horizontal")


def compare_attributions(
    spans: Spans, rules: StageRules | None = None, *, disagreement_share: float = DISAGREEMENT_SHARE
) -> pl.DataFrame:
    """Both views side by side, per request and stage, flagging where they disagree.

    Args:
        disagreement_share: a stage disagrees when ``|wall_clock_ns - critical_path_ns|`` is at least this
            share of the request's duration (default :data:`DISAGREEMENT_SHARE`).

    Returns:
        trace_id (String), stage (STAGE_DTYPE), critical_path_ns (Int64), wall_clock_ns (Float64),
        difference_ns (Float64, wall clock minus critical path), difference_share (Float64, of the root's
        duration; null for a zero-length root), disagree (Boolean). One row per request and stage where
        either view is non-zero, sorted by trace_id then stage.
    """
    analysis = analyze(spans, rules)
    path, wall = _critical_path_totals(analysis), _wall_clock_totals(analysis)
    trace_index, stage_index = np.nonzero((path != 0) | (wall != 0))
    tree = analysis.tree
    root = tree.primary_root
    total = (tree.end_ns[root] - tree.start_ns[root])[trace_index].astype(np.float64)
    difference = wall[trace_index, stage_index] - path[trace_index, stage_index]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(total > 0, difference / total, np.nan)
    return pl.DataFrame(
        {
            "trace_id": tree.spans["trace_id"].gather(root).gather(trace_index),
            "stage": stage_series(stage_index),
            "critical_path_ns": path[trace_index, stage_index],
            "wall_clock_ns": wall[trace_index, stage_index],
            "difference_ns": difference,
            "difference_share": pl.Series(share).fill_nan(None),
            "disagree": np.abs(difference) >= disagreement_share * total,
        }
    ).with_columns(pl.col("disagree") & pl.col("difference_share").is_not_null())


def span_attributions(spans: Spans, rules: StageRules | None = None) -> pl.DataFrame:
    """Per span: its stage, self time and its share in both views (the per-span derived table).

    Returns:
        One row per span in ``SpanTree.spans`` order: trace_id, span_id, name, service_name (String);
        stage (STAGE_DTYPE, the span's rule stage; a split span's phases are in :func:`stage_breakdown`);
        duration_ns, self_time_ns (Int64, over the span's own interval, ``TraceAnalysis.own_intervals``: a root
        whose window is its trace's envelope but which ended keeps its own duration); on_critical_path (Boolean);
        critical_path_ns (Int64, its sections inside its own interval, every tree); wall_clock_ns (Float64, root
        trees only, 0 elsewhere).
    """
    analysis = analyze(spans, rules)
    tree, sections, shares = analysis.tree, analysis.sections, analysis.wall_clock
    own_start, own_end = analysis.own_intervals
    wall_ns = np.bincount(shares.span, weights=shares.share_ns, minlength=tree.size)
    return pl.DataFrame(
        {
            "trace_id": tree.spans["trace_id"],
            "span_id": tree.spans["span_id"],
            "name": tree.spans["name"],
            "service_name": tree.spans["service_name"],
            "stage": stage_series(analysis.assignment.stage),
            "duration_ns": own_end - own_start,
            "self_time_ns": analysis.self_time_ns,
            "on_critical_path": sections.on_path,
            "critical_path_ns": own_critical_ns(sections, own_start, own_end),
            "wall_clock_ns": wall_ns,
        }
    )


def stage_percentiles(breakdowns: pl.DataFrame, group_by: Sequence[str] = ()) -> pl.DataFrame:
    """p50/p95/p99 of each stage's time per request, and each stage's share of end-to-end latency.

    Args:
        breakdowns: :func:`stage_breakdown_wide` output (or any frame with ``duration_ns``, the
            :data:`STAGE_COLUMNS` and the ``group_by`` columns), one row per request of the window.
        group_by: columns to group requests by, e.g. ``["root_service"]``, ``["model"]``, ``["tenant"]``.

    Returns:
        The ``group_by`` columns, stage (STAGE_DTYPE), requests (UInt32), p50_ns, p95_ns, p99_ns, mean_ns
        (Float64 ns, over every request of the group, zero where the stage is absent; linear
        interpolation), share (Float64 in [0, 1]: the stage's total over the group's total latency).
        Sorted by the group columns then stage.
    """
    groups = list(group_by)
    long = breakdowns.unpivot(
        on=list(STAGE_COLUMNS), index=[*groups, "duration_ns"], variable_name="stage", value_name="stage_ns"
    ).with_columns(pl.col("stage").str.strip_suffix("_ns").cast(STAGE_DTYPE))
    return (
        long.group_by(*groups, "stage")
        .agg(
            pl.len().cast(pl.UInt32).alias("requests"),
            *(pl.col("stage_ns").quantile(q, "linear").alias(f"p{round(q * 100)}_ns") for q in PERCENTILES),
            pl.col("stage_ns").mean().alias("mean_ns"),
            (pl.col("stage_ns").sum() / pl.col("duration_ns").sum()).alias("share"),
        )
        .sort(*groups, "stage")
    )


def latency_percentiles(requests: pl.DataFrame, group_by: Sequence[str] = ()) -> pl.DataFrame:
    """p50/p95/p99 of end-to-end latency, TTFT and TPOT over a window of requests.

    Args:
        requests: :func:`request_summary` or :func:`stage_breakdown_wide` output (columns duration_ns,
            ttft_ns, tpot_ns and the ``group_by`` columns).
        group_by: columns to group requests by.

    Returns:
        The ``group_by`` columns, metric (String: ``e2e``, ``ttft``, ``tpot``), requests (UInt32, requests
        reporting the metric), p50_ns, p95_ns, p99_ns, mean_ns (Float64 ns; TPOT in ns per output token).
        Metrics no request reports are left out.
    """
    groups = list(group_by)
    metrics = {"e2e": "duration_ns", "ttft": "ttft_ns", "tpot": "tpot_ns"}
    long = requests.select(
        *groups, *(pl.col(column).cast(pl.Float64).alias(metric) for metric, column in metrics.items())
    ).unpivot(on=list(metrics), index=groups, variable_name="metric", value_name="value_ns")
    return (
        long.drop_nulls("value_ns")
        .group_by(*groups, "metric")
        .agg(
            pl.len().cast(pl.UInt32).alias("requests"),
            *(pl.col("value_ns").quantile(q, "linear").alias(f"p{round(q * 100)}_ns") for q in PERCENTILES),
            pl.col("value_ns").mean().alias("mean_ns"),
        )
        .sort(*groups, pl.col("metric").replace_strict({m: i for i, m in enumerate(metrics)}, return_dtype=pl.Int8))
    )
