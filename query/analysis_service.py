"""Service functions of the LLM-aware analysis: what the REST API (``api.analysis_routes``), the Dash pages and the
diagnosis rules call. No SQL here (it is in ``storage.analysis_sql``) and no HTTP.

Two families:

- **Per trace, on the fly** (``trace_*``): read the trace's spans and analyse them now with the configured
  stage rules (:mod:`analysis`), so they answer before the pipeline has run and always reflect every span
  stored. Each returns None when the trace is unknown (to the reading tenant).
- **Over a window** (``stages``, ``stage_shares_over_time``, ``hotspots``, ``flamegraph``, ``trace_summaries``,
  ``span_rows``): aggregates computed in ClickHouse over the pipeline's tables (``hotspan_trace_summary``,
  ``hotspan_span_analysis``), so they cover the traces the pipeline has analysed (quiet for ``trace_idle_s``).

Every function takes a keyword-only ``tenant`` (``storage.tenancy``): the owner tenant whose data is read, or
None for every tenant (admin tokens only). Times are ns since the Unix epoch, durations ns, unless a name says
otherwise. Blocking: call from a worker thread in async code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from analysis import (
    STAGES,
    TraceAnalysis,
    analyze,
    compare_attributions,
    critical_path,
    data_quality,
    stage_breakdown_wide,
    trace_statistics,
    wall_clock_breakdown,
)
from processors.pipeline.config import TracePipelineConfig
from processors.pipeline.flame import flame_graph, trace_nodes
from query.bounded_trace import read_bounded_trace
from storage.analysis_store import AnalysisFilter, AnalysisStore, GroupBy
from storage.reader import TraceReader
from units import NS_PER_S

StatisticsGroup = Literal["service_operation", "service", "operation"]
"""How :meth:`AnalysisService.trace_statistics` groups spans (Jaeger UI's choices)."""
STATISTICS_COLUMNS: dict[StatisticsGroup, tuple[str, ...]] = {
    "service_operation": ("service_name", "name"),
    "service": ("service_name",),
    "operation": ("name",),
}


@dataclass(frozen=True)
class TraceStages:
    """Where one request's time went.

    Attributes:
        trace_id, root_span_id: the request and its root span (``analysis.tree``'s primary root).
        total_ns: the request window's duration (its end-to-end latency: the root span's, or the envelope of the
            spans where the root is missing or never ended, ``analysis.request_window``).
        stages_ns: critical-path view: ns per stage of ``analysis.STAGES`` (every stage, 0 where absent),
            summing exactly to ``total_ns``.
        wall_clock_stages_ns: wall-clock view (each instant split among the deepest active spans): whole ns per
            stage, summing exactly to ``total_ns`` (the largest remainder method rounds the view's shares).
        disagreements: stages where the two views differ by at least 5 % of ``total_ns``
            (``analysis.compare_attributions``).
        ttft_ns: time to first token of the request's first LLM call reporting one; None without.
        tpot_ns: time per output token over its LLM calls (ns per token); None without.
        data_quality: the data-quality line, one sentence per concern (``analysis.data_quality``): the window is
            the envelope of the spans, the root is implausible, work outlived the span that started it, a server's
            spans were moved against clock skew, spans were re-attached; empty when none.
    """

    trace_id: str
    root_span_id: str
    total_ns: int
    stages_ns: dict[str, int]
    wall_clock_stages_ns: dict[str, int]
    disagreements: list[str]
    ttft_ns: int | None
    tpot_ns: float | None
    data_quality: list[str]


@dataclass(frozen=True)
class StageReport:
    """Window aggregates of the stages (frames of ``AnalysisStore.stage_percentiles``, ``latency_percentiles``
    and ``window_quality``, with the same ``group`` values): ``quality`` counts the requests whose window the
    analysis repaired, by repair (``analysis.request_window``), so a reader knows how many of the numbers rest on
    an envelope, attached orphans or work kept past the span that started it."""

    percentiles: pl.DataFrame
    latency: pl.DataFrame
    quality: pl.DataFrame


@dataclass(frozen=True)
class HotspotReport:
    """The window's hotspots: (service, operation) ranked by total self time and by p95 self time
    (``AnalysisStore.hotspot_ranking`` columns), and its flagged spans (``flagged_spans`` columns)."""

    by_self_time: pl.DataFrame
    by_p95_self_time: pl.DataFrame
    flagged: pl.DataFrame


class AnalysisService:
    """The service functions (module docstring), over one reader, one analysis store and one config.

    Args:
        reader: spans of single traces.
        store: the pipeline's tables.
        config: the stage rules (per-trace analysis uses the same table as the pipeline) and prices; kept as
            :attr:`config`, the configuration the trace pipeline runs with too.
    """

    def __init__(self, reader: TraceReader, store: AnalysisStore, config: TracePipelineConfig) -> None:
        self._reader = reader
        self._store = store
        self.config = config

    # --- per trace -----------------------------------------------------------------------------------------

    def trace_analysis(self, trace_id: str, *, tenant: str | None) -> TraceAnalysis | None:
        """The analysis of one trace (canonical 32-hex ID), or None when it has no spans the tenant can read. A trace
        of more spans than ``config.max_trace_spans`` (``HOTSPAN_MAX_TRACE_SPANS``) is analysed as its first that
        many by start, as the trace page shows it: the one bounded by-ID read
        (:func:`query.bounded_trace.read_bounded_trace`)."""
        spans = read_bounded_trace(self._reader, trace_id, tenant=tenant, limit=self.config.max_trace_spans).spans
        return analyze(spans, self.config.stage_rules) if spans.height else None

    def trace_stages(self, trace_id: str, *, tenant: str | None) -> TraceStages | None:
        """The request's stage decomposition in both views, with TTFT and TPOT (:func:`trace_stages_of`)."""
        analysis = self.trace_analysis(trace_id, tenant=tenant)
        return None if analysis is None else trace_stages_of(analysis)

    def trace_critical_path(self, trace_id: str, *, tenant: str | None) -> pl.DataFrame | None:
        """The critical path of the trace's root (:func:`critical_path_of`); None for an unknown trace."""
        analysis = self.trace_analysis(trace_id, tenant=tenant)
        return None if analysis is None else critical_path_of(analysis)

    def trace_statistics(
        self, trace_id: str, group_by: StatisticsGroup = "service_operation", *, tenant: str | None
    ) -> pl.DataFrame | None:
        """Jaeger UI's Trace Statistics table of the trace (``analysis.trace_statistics``): the group columns,
        count, total_ms, avg_ms, min_ms, max_ms, self_total_ms, self_avg_ms, self_min_ms, self_max_ms (Float64
        ms), percent (self total over the trace's duration, %). Heaviest self time first. None when unknown."""
        analysis = self.trace_analysis(trace_id, tenant=tenant)
        if analysis is None:
            return None
        return trace_statistics(analysis, STATISTICS_COLUMNS[group_by]).drop("trace_id")

    def trace_flamegraph(self, trace_id: str, *, tenant: str | None) -> pl.DataFrame | None:
        """The trace's flame graph weighted by self time: :func:`processors.pipeline.flame.flame_graph` columns,
        under a virtual root labelled with the trace ID. None when unknown."""
        analysis = self.trace_analysis(trace_id, tenant=tenant)
        if analysis is None:
            return None
        return flame_graph(trace_nodes(analysis), trace_id, 1)

    # --- over a window ---------------------------------------------------------------------------------------

    def stages(self, where: AnalysisFilter, group_by: GroupBy = "", *, tenant: str | None) -> StageReport:
        """p50/p95/p99 per stage and each stage's share of end-to-end latency, p50/p95/p99 of e2e, TTFT and TPOT,
        and the requests whose window was repaired, per group (root service, model, request tenant, or all), over
        the window's analysed requests."""
        return StageReport(
            self._store.stage_percentiles(where, group_by, tenant=tenant),
            self._store.latency_percentiles(where, group_by, tenant=tenant),
            self._store.window_quality(where, group_by, tenant=tenant),
        )

    def quality_examples(self, where: AnalysisFilter, limit: int = 5, *, tenant: str | None) -> dict[str, list[str]]:
        """Per repair of the request window (``enveloped``, ``attached``, ``outliving``, ``implausible_root``: the
        ``AnalysisStore.window_quality`` counts), up to ``limit`` of the window's requests it was made on, longest
        first; a repair made on none is absent."""
        rows = self._store.quality_examples(where, limit, tenant=tenant)
        return {
            str(repair): group["trace_id"].to_list()
            for (repair,), group in rows.group_by("repair", maintain_order=True)
        }

    def stage_shares_over_time(self, where: AnalysisFilter, bucket_s: int, *, tenant: str | None) -> pl.DataFrame:
        """Per time bucket of ``bucket_s`` seconds (of request start) and stage, the stage's summed time and
        its share of the bucket's summed end-to-end latency (``AnalysisStore.stage_shares_over_time``)."""
        return self._store.stage_shares_over_time(where, bucket_s * NS_PER_S, tenant=tenant)

    def hotspots(self, where: AnalysisFilter, limit: int = 20, *, tenant: str | None) -> HotspotReport:
        """The ``limit`` heaviest (service, operation) pairs by total and by p95 self time, and the ``limit``
        longest flagged spans, over the window's analysed spans."""
        return HotspotReport(
            self._store.hotspot_ranking(where, "self_total_ns", limit, tenant=tenant),
            self._store.hotspot_ranking(where, "self_p95_ns", limit, tenant=tenant),
            self._store.flagged_spans(where, limit, tenant=tenant),
        )

    def flamegraph(self, where: AnalysisFilter, *, tenant: str | None) -> pl.DataFrame:
        """The aggregated flame graph of the window's analysed requests (filters: ``start_ns``/``end_ns`` on the
        request's start, ``request_tenant``, ``model``; ``service``/``operation``: requests having such a span),
        weighted by self time: :func:`processors.pipeline.flame.flame_graph` columns under a root counting the
        requests."""
        nodes = self._store.flame_nodes(where, tenant=tenant)
        traces = int(nodes["traces"][0]) if nodes.height else 0
        return flame_graph(nodes.drop("traces"), "all traces", traces)

    def trace_summaries(self, where: AnalysisFilter, limit: int = 1000, *, tenant: str | None) -> pl.DataFrame:
        """The window's analysed requests, newest first, one row each (``AnalysisStore.trace_summaries``: the
        columns of ``analysis.stage_breakdown_wide`` and more), ready for ``analysis.stage_percentiles`` and
        ``analysis.latency_percentiles`` or a diagnosis rule."""
        return self._store.trace_summaries(where, limit, tenant=tenant)

    def span_rows(self, where: AnalysisFilter, limit: int = 10_000, *, tenant: str | None) -> pl.DataFrame:
        """The window's analysed spans, newest first (``AnalysisStore.span_rows``)."""
        return self._store.span_rows(where, limit, tenant=tenant)

    @property
    def currency(self) -> str:
        """The currency of every cost (the price table's)."""
        return self.config.prices.currency

    def trace_usage(self, trace_ids: list[str], *, tenant: str | None, stage: str = "") -> pl.DataFrame:
        """Model usage of analysed traces among ``trace_ids``, one row each: trace_id, llm_calls, input_tokens,
        output_tokens, cached_input_tokens, reasoning_tokens (UInt64), dominant_stage (String), stage_ns (UInt64:
        the critical-path ns of ``stage``, an ``analysis.STAGES`` name; 0 for ``""``), cost (Float64 in
        :attr:`currency`; null when the trace used no model or a model the price table does not price). Traces
        not analysed yet are absent."""
        rows = self._store.trace_usage(trace_ids, tenant=tenant, stage=stage)
        priced = rows.with_columns(
            self.config.prices.cost(
                rows.select(
                    "model",
                    pl.col("model_input_tokens").alias("input_tokens"),
                    pl.col("model_output_tokens").alias("output_tokens"),
                    pl.col("model_cached_input_tokens").alias("cached_input_tokens"),
                )
            )
        )
        totals = ["llm_calls", "input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens"]
        unpriced = pl.col("model").is_not_null() & pl.col("cost").is_null()
        return (
            priced.group_by("trace_id", maintain_order=True)
            .agg(
                *(pl.col(name).first() for name in totals),
                pl.col("dominant_stage").first(),
                pl.col("stage_ns").first(),
                pl.col("cost").sum().alias("cost_sum"),
                pl.col("model").is_not_null().any().alias("used_models"),
                unpriced.any().alias("unpriced"),
            )
            .with_columns(pl.when(pl.col("used_models") & ~pl.col("unpriced")).then("cost_sum").alias("cost"))
            .drop("cost_sum", "used_models", "unpriced")
        )

    def usage(self, where: AnalysisFilter, group_by: GroupBy = "", *, tenant: str | None) -> pl.DataFrame:
        """Model calls, tokens and cost per group (root service, model, request tenant, or all) and model over
        the window's analysed requests: the columns of ``AnalysisStore.token_usage`` and cost (Float64 in
        :attr:`currency`, null for a model the price table does not price)."""
        rows = self._store.token_usage(where, group_by, tenant=tenant)
        return rows.with_columns(self.config.prices.cost(rows))


def trace_stages_of(analysis: TraceAnalysis) -> TraceStages:
    """One request's stage decomposition in both views, with TTFT and TPOT (:class:`TraceStages`), from the
    analysis of its spans. Pure."""
    wide = stage_breakdown_wide(analysis).row(0, named=True)
    wall = dict(wall_clock_breakdown(analysis).select(pl.col("stage").cast(pl.String), "duration_ns").iter_rows())
    disagree = compare_attributions(analysis).filter("disagree")["stage"].cast(pl.String).to_list()
    return TraceStages(
        trace_id=wide["trace_id"],
        root_span_id=wide["root_span_id"],
        total_ns=int(wide["duration_ns"]),
        stages_ns={stage: int(wide[f"{stage}_ns"]) for stage in STAGES},
        wall_clock_stages_ns=whole_ns([wall.get(stage, 0.0) for stage in STAGES], int(wide["duration_ns"])),
        disagreements=disagree,
        ttft_ns=wide["ttft_ns"],
        tpot_ns=wide["tpot_ns"],
        data_quality=data_quality(analysis)["notes"][0].to_list(),
    )


def whole_ns(shares: Sequence[float], total_ns: int) -> dict[str, int]:
    """``shares`` (ns per stage of ``analysis.STAGES``, in its order, summing to ``total_ns`` up to float rounding)
    as whole ns summing exactly to ``total_ns``, by the largest remainder method (Hamilton's apportionment): each
    share floored, the ns left over given one each to the largest fractional parts among the stages that have time,
    and what float rounding leaves beyond that (past 2^53 ns a share is a multiple of its ulp) to the largest share.
    A stage without time stays 0."""
    # Python ints, not int64: a share of a span from 1970 to 2262 rounds to 2^63 ns as a float, past int64.
    whole = [math.floor(share) for share in shares]
    timed = [index for index, share in enumerate(shares) if share > 0]
    left = max(total_ns - sum(whole), 0)
    for index in sorted(timed, key=lambda i: whole[i] - shares[i])[:left]:
        whole[index] += 1
    if timed and (off := total_ns - sum(whole)):
        whole[max(timed, key=lambda i: shares[i])] += off
    return dict(zip(STAGES, whole, strict=True))


def critical_path_of(analysis: TraceAnalysis) -> pl.DataFrame:
    """The critical path of the analysed trace's root (Jaeger UI's semantics, ``analysis.critical_path``: FOLLOWS_FROM
    children left out, overflowing children clamped). Pure.

    Returns:
        One row per section, in time order: span_id, service_name, name, stage (String; a vLLM span's
        section is cut at its phase boundaries, each piece with its phase), start_ns, end_ns, duration_ns
        (Int64). The durations sum to the request's window. Time no span covers (the window is the envelope of
        the trace's spans and its root ended: ``analysis.request_window``) is a section of stage ``other`` whose
        span_id, service_name and name are empty: no span owns it.
    """
    tree = analysis.tree
    spans = tree.spans.select(
        "span_id",
        "service_name",
        "name",
        pl.Series("stage", STAGES, dtype=pl.String).gather(analysis.assignment.stage),
    )
    sections = critical_path(tree).filter("in_primary_tree").join(spans, on="span_id", how="left")
    own_start, own_end = analysis.own_intervals
    own = pl.DataFrame({"span_id": tree.spans["span_id"], "own_start_ns": own_start, "own_end_ns": own_end})
    # Pieces are cut at each span's own interval, so a section lies wholly inside it or wholly outside.
    outside = (pl.col("end_ns") <= pl.col("own_start_ns")) | (pl.col("start_ns") >= pl.col("own_end_ns"))
    return (
        _split_by_phase(sections, analysis)
        .join(own, on="span_id", how="left")
        .with_columns(
            pl.when(outside).then(pl.lit("")).otherwise(c).alias(c) for c in ("span_id", "service_name", "name")
        )
        .drop("own_start_ns", "own_end_ns")
        .sort("start_ns", "span_id")
    )


def _split_by_phase(sections: pl.DataFrame, analysis: TraceAnalysis) -> pl.DataFrame:
    """``sections`` with each section of a span tiled into vLLM phases cut at the phase boundaries."""
    tree, pieces = analysis.tree, analysis.pieces
    tiled_ids = tree.spans["span_id"].gather(pieces.tiled)
    columns = ["span_id", "service_name", "name", "stage", "start_ns", "end_ns", "duration_ns"]
    whole = sections.filter(~pl.col("span_id").is_in(tiled_ids.implode())).select(columns)
    if not tiled_ids.len():
        return whole
    phases = pl.DataFrame(
        {
            "span_id": tree.spans["span_id"].gather(pieces.span),
            "phase": pl.Series(STAGES, dtype=pl.String).gather(pieces.stage),
            "phase_start_ns": pieces.start_ns,
            "phase_end_ns": pieces.end_ns,
        }
    ).filter(pl.col("span_id").is_in(tiled_ids.implode()))
    cut = (
        sections.filter(pl.col("span_id").is_in(tiled_ids.implode()))
        .join(phases, on="span_id")
        .with_columns(
            pl.max_horizontal("start_ns", "phase_start_ns").alias("start_ns"),
            pl.min_horizontal("end_ns", "phase_end_ns").alias("end_ns"),
            pl.col("phase").alias("stage"),
        )
        .filter(pl.col("end_ns") > pl.col("start_ns"))
        .with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))
        .select(columns)
    )
    return pl.concat([whole, cut])
