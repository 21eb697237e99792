"""What every rule reads about one window of traces: the spans with their analysis, the requests' stage
breakdown, the LLM calls, and (optionally) the engine's metrics. Each view is computed once, on first use.

A *request* is a trace and its end-to-end latency is its root span's duration (:mod:`analysis.decomposition`);
shares "of end-to-end" below are over the summed latency of every request in the window, on the critical path,
so they add up across stages and rules can compare them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import numpy as np
import polars as pl

from analysis import TraceAnalysis, analyze, span_attributions, stage_breakdown_wide
from analysis.spans import attribute
from analysis.stage_rules import StageRules
from analysis.vllm import BOUNDARIES, calls_of_prepared, phase_boundaries
from diagnosis.metrics import EngineMetrics
from diagnosis.signals import IntArray

INSTANCE_KEY = "service.instance.id"
"""Resource attribute naming one process of a service; spans without it share the instance ``""``."""


class DiagnosisContext:
    """The window's spans and their derived views, shared by all rules.

    Args:
        spans: a span frame (contract in :mod:`analysis.spans`; what ``TraceReader.search_spans`` returns),
            whole traces. ``resource_attributes`` (for ``service.instance.id``) and ``status_code`` are used
            when present.
        metrics: the engine's metrics over the window, or ``None`` (trace-only evidence).
        stage_rules: stage table for the analysis; default the packaged one.

    Not thread-safe while views are first computed; read-only afterwards.

    Raises:
        ValueError: from the views, when ``spans`` breaks the span frame contract.
    """

    def __init__(
        self,
        spans: pl.DataFrame,
        metrics: EngineMetrics | None = None,
        *,
        stage_rules: StageRules | None = None,
    ) -> None:
        self._frame = spans
        self.metrics = metrics
        self._stage_rules = stage_rules

    @cached_property
    def analysis(self) -> TraceAnalysis:
        """The analysis of every span (tree, self time, critical path, stages)."""
        return analyze(self._frame, self._stage_rules)

    @cached_property
    def spans(self) -> pl.DataFrame:
        """One row per span, in ``SpanTree`` order (row ``i`` is span index ``i``).

        Columns: index, parent_index (Int64; -1 for a root), trace_id, span_id, name, service_name, kind,
        instance (``service.instance.id``, ``""`` when unknown), status_code (``Unset`` when the frame has
        none), attributes (Map); start_ns, end_ns, duration_ns, self_time_ns, critical_path_ns (Int64 ns:
        the span's own sections of its trace's critical path); stage (String); child_count (Int64);
        in_request (Boolean: under its trace's root, so part of the request's latency).
        """
        analysis = self.analysis
        tree = analysis.tree
        per_span = span_attributions(analysis)
        frame = tree.spans
        instance = (
            pl.col("resource_attributes").map.get(INSTANCE_KEY).fill_null("")
            if "resource_attributes" in frame.columns
            else pl.lit("")
        )
        status = pl.col("status_code").fill_null("Unset") if "status_code" in frame.columns else pl.lit("Unset")
        child_count = np.bincount(tree.parent[tree.parent >= 0], minlength=tree.size)
        return frame.select(
            pl.int_range(pl.len(), dtype=pl.Int64).alias("index"),
            pl.Series("parent_index", tree.parent),
            "trace_id",
            "span_id",
            "name",
            "service_name",
            "kind",
            instance.alias("instance"),
            status.alias("status_code"),
            "attributes",
            pl.Series("start_ns", tree.start_ns),
            pl.Series("end_ns", tree.end_ns),
            pl.Series("duration_ns", tree.end_ns - tree.start_ns),
            per_span["self_time_ns"],
            per_span["critical_path_ns"],
            per_span["stage"].cast(pl.String),
            pl.Series("child_count", child_count.astype(np.int64)),
            pl.Series("in_request", tree.in_primary_tree),
        )

    @property
    def parent(self) -> IntArray:
        """Parent index per span (-1 for roots), aligned with :attr:`spans`."""
        return self.analysis.tree.parent

    @cached_property
    def requests(self) -> pl.DataFrame:
        """Per request (trace): :func:`analysis.stage_breakdown_wide` (trace_id, duration_ns, the stage columns
        ``<stage>_ns`` on the critical path, ttft_ns, tpot_ns ...)."""
        return stage_breakdown_wide(self.analysis)

    @cached_property
    def e2e_total_ns(self) -> int:
        """Summed end-to-end latency of every request in the window, ns."""
        return int(self.requests["duration_ns"].sum()) if self.requests.height else 0

    def stage_share(self, stage: str) -> float:
        """The stage's share of end-to-end latency on the critical path (0 for an empty window)."""
        if not self.e2e_total_ns:
            return 0.0
        return float(self.requests[f"{stage}_ns"].sum()) / self.e2e_total_ns

    def critical_share(self, critical_path_ns: float) -> float:
        """``critical_path_ns`` as a share of the window's end-to-end latency (0 for an empty window)."""
        return critical_path_ns / self.e2e_total_ns if self.e2e_total_ns else 0.0

    @cached_property
    def llm_calls(self) -> pl.DataFrame:
        """Every span reporting engine latencies (vLLM's ``llm_request``), one row each.

        Columns: those of :func:`analysis.llm_calls` (queue_ns, prefill_ns, decode_ns, ttft_ns, prompt_tokens,
        completion_tokens, tpot_ns, model ...), plus index and parent_index (Int64, into :attr:`spans`),
        instance (String), engine (String: service and instance, the engine the call ran on), attributes
        (Map), parent_attributes (Map or null: the calling client span's attributes), queued_ns,
        scheduled_ns, first_token_ns, last_token_ns (Int64 ns since the epoch, null without the latency
        attributes; :func:`analysis.vllm.phase_boundaries`).
        """
        spans = self.spans
        calls = calls_of_prepared(self.analysis.tree.spans)
        keyed = spans.select("trace_id", "span_id", "index", "parent_index", "instance", "attributes")
        joined = calls.join(keyed, on=["trace_id", "span_id"], how="left", maintain_order="left")
        parents = spans.select(pl.col("index").alias("parent_index"), pl.col("attributes").alias("parent_attributes"))
        joined = joined.join(parents, on="parent_index", how="left", maintain_order="left")
        boundaries = phase_boundaries(
            spans.select(
                "index",
                pl.col("start_ns").alias("start_time_unix_nano"),
                pl.col("end_ns").alias("end_time_unix_nano"),
                "attributes",
            ).filter(pl.col("index").is_in(joined["index"].implode()))
        ).select("index", *BOUNDARIES)
        return joined.join(boundaries, on="index", how="left", maintain_order="left").with_columns(
            pl.concat_str("service_name", pl.lit("/"), "instance").alias("engine")
        )

    def llm_attribute(self, keys: Sequence[str]) -> pl.Expr:
        """Over :attr:`llm_calls`: the first of ``keys`` on the engine span, else on its calling client span."""
        own = [attribute(key) for key in keys]
        calling = [attribute(key, "parent_attributes") for key in keys]
        return pl.coalesce(*own, *calling) if keys else pl.lit(None, dtype=pl.String)
