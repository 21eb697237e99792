"""What every rule reads about one window of traces: the spans with their analysis, the requests' stage
breakdown, the engine's LLM calls, the model calls any client instrumentation recorded (and the HTTP attempts
that carried them), and (optionally) the engine's metrics. Each view is computed once, on first use.

A *request* is a trace and its end-to-end latency is its root span's duration (:mod:`analysis.decomposition`);
shares "of end-to-end" below are over the summed latency of every request in the window, on the critical path,
so they add up across stages and rules can compare them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import numpy as np
import numpy.typing as npt
import polars as pl

from analysis import SpanTree, TraceAnalysis, analyze, ancestry, span_attributions, stage_breakdown_wide
from analysis.conversation import conversation_key
from analysis.genai import TOKEN_COLUMNS
from analysis.model_calls import model_calls
from analysis.spans import attribute
from analysis.stage_rules import StageRules
from analysis.vllm import BOUNDARIES, calls_of_prepared, phase_boundaries
from diagnosis.contention import NO_CONTENTION, Contention
from diagnosis.metrics import EngineMetrics
from diagnosis.signals import IntArray, http_status

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

    Attributes:
        contention: how strongly host CPU contention inflates the window's timings; set by
            :class:`diagnosis.Diagnoser` from the ``cpu_contention`` rule before the other rules run
            (:data:`diagnosis.contention.NO_CONTENTION` until then, and when that rule is disabled).

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
        self.contention: Contention = NO_CONTENTION

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

    @cached_property
    def request_conversations(self) -> pl.DataFrame:
        """Per request (trace) naming one, the conversation it is a turn of: trace_id, conversation_id (String;
        :func:`analysis.conversation.conversation_key` of its first span naming one). An agent names it on its own
        span, seldom on a model call's, so a call's conversation is read off its request."""
        frame = self.analysis.tree.spans
        return frame.group_by("trace_id").agg(conversation_key(frame).drop_nulls().first()).drop_nulls()

    def llm_attribute(self, keys: Sequence[str]) -> pl.Expr:
        """Over :attr:`llm_calls`: the first of ``keys`` on the engine span, else on its calling client span."""
        own = [attribute(key) for key in keys]
        calling = [attribute(key, "parent_attributes") for key in keys]
        return pl.coalesce(*own, *calling) if keys else pl.lit(None, dtype=pl.String)

    @cached_property
    def _model_call_rows(self) -> pl.DataFrame:
        """:func:`analysis.model_calls.model_calls` with ``unit``: the index of the model call each row belongs
        to (the outermost call of its chain), rows that are no model call of their own dropped (see
        :func:`model_call_units`)."""
        rows = model_calls(self.analysis)
        unit = model_call_units(self.analysis.tree, rows["index"].to_numpy(), rows["engine"].to_numpy())
        return rows.with_columns(pl.Series("unit", unit)).filter(pl.col("unit") >= 0)

    @cached_property
    def model_calls(self) -> pl.DataFrame:
        """One row per model call a request made, whatever instrumentation recorded it: the outermost calls of
        :func:`analysis.model_calls.model_calls` (less requests to an application that makes model calls of
        its own, :func:`model_call_units`), each with what its whole chain reports (the calls nested in it: an
        SDK's span under a framework's, vLLM's ``llm_request`` under both). Client-side evidence: no engine span
        or metric is needed, and a call whose engine traces it is still one row.

        Columns, sorted by trace_id then start: trace_id, span_id, name, service_name (String); index,
        parent_index (Int64, into :attr:`spans`); start_ns, end_ns, duration_ns (Int64 ns); position (Int64:
        the call's rank in its trace by start, from 0); model, provider (String, the outermost span's value
        first, null when no span of the chain names one); input_tokens, output_tokens, cached_input_tokens,
        reasoning_tokens (Int64, summed over the chain with each generation counted once, null where no span
        of the chain reports the count); ttft_ns, stream_ns (Int64 ns: the first token's delay after the
        call's start and the time after it, from the client-side spans of the chain, else from vLLM's engine
        span; null when unknown); engine (Boolean: a vLLM engine span is in the chain); status_code (String,
        the outermost span's); in_request (Boolean: part of its request's latency); attributes (Map, the
        outermost span's).
        """
        rows = self._model_call_rows
        instant = pl.col("start_ns") + pl.col("ttft_ns")
        chains = rows.group_by("unit").agg(
            *(pl.when(pl.col(name).is_not_null().any()).then(pl.col(name).sum()).alias(name) for name in TOKEN_COLUMNS),
            # The client saw the first token where it recorded it; the engine's own instant is the fallback.
            pl.coalesce(instant.filter(~pl.col("engine")).min(), instant.filter(pl.col("engine")).min()).alias(
                "first_token_ns"
            ),
            *(
                pl.col(name).sort_by(pl.col("index") == pl.col("unit"), descending=True).drop_nulls().first()
                for name in ("model", "provider")
            ),
            pl.col("engine").any(),
        )
        outer = rows.filter(pl.col("index") == pl.col("unit")).select(
            "trace_id", "span_id", "index", "name", "service_name", "start_ns", "end_ns", "duration_ns", "status_code"
        )
        joined = outer.join(chains, left_on="index", right_on="unit", how="left", maintain_order="left")
        context = self.spans.select("parent_index", "in_request", "attributes")[joined["index"].to_numpy()]
        return (
            pl.concat([joined, context], how="horizontal")
            .sort("trace_id", "start_ns", "index")
            .with_columns(
                pl.int_range(pl.len(), dtype=pl.Int64).over("trace_id").alias("position"),
                (pl.col("first_token_ns") - pl.col("start_ns")).alias("ttft_ns"),
                (pl.col("end_ns") - pl.col("first_token_ns")).alias("stream_ns"),
            )
            .select(
                "trace_id",
                "span_id",
                "name",
                "service_name",
                "index",
                "parent_index",
                "start_ns",
                "end_ns",
                "duration_ns",
                "position",
                "model",
                "provider",
                *TOKEN_COLUMNS,
                "ttft_ns",
                "stream_ns",
                "engine",
                "status_code",
                "in_request",
                "attributes",
            )
        )

    @cached_property
    def model_call_attempts(self) -> pl.DataFrame:
        """The HTTP (or RPC) client requests that carried each model call of :attr:`model_calls`: one per
        attempt, so a call the client retried has several. A call with no such span below it has none here.

        Columns, sorted by call then start: trace_id (String); call_index (Int64, the carried call's ``index``
        in :attr:`model_calls`); index (Int64, the attempt's span, into :attr:`spans`); start_ns, end_ns (Int64
        ns); status_code (String, the span's status); http_status (Int64: ``http.response.status_code``, the
        older ``http.status_code``, or a numeric ``error.type``; null when the span tells none); attributes (Map).
        """
        assignment = self.analysis.assignment
        carriers = np.flatnonzero(assignment.carried_call >= 0)
        calls = self._model_call_rows.select("index", pl.col("unit").alias("call_index"))
        spans = self.spans[carriers]
        return (
            spans.select(
                "trace_id",
                pl.Series("carried", assignment.carried_call[carriers]),
                "index",
                "start_ns",
                "end_ns",
                "status_code",
                http_status().alias("http_status"),
                "attributes",
            )
            .join(calls, left_on="carried", right_on="index", how="inner")
            .select("trace_id", "call_index", "index", "start_ns", "end_ns", "status_code", "http_status", "attributes")
            .sort("call_index", "start_ns", "index")
        )


def model_call_units(tree: SpanTree, calls: IntArray, engine: npt.NDArray[np.bool_]) -> IntArray:
    """Per model call span (``calls``: span indices, as :func:`analysis.model_calls.model_calls` lists them;
    ``engine``: which are engine spans), the model call it belongs to, or -1 when it is none.

    A call belongs to the outermost client-side call at or above it. A client-side call that holds another
    client-side call below a SERVER span is a request to an application that makes model calls itself (an agent
    service or an LLM proxy such as LiteLLM behind an OpenAI-compatible route), not a model call: it belongs to
    nothing and the calls below it stand alone. An engine span under no client-side call is a call of its own
    (vLLM traced, its client not).
    """
    client = np.zeros(tree.size, dtype=bool)
    client[calls[~engine]] = True
    server = tree.spans["kind"].is_in(("Server",)).to_numpy()
    nearest_client = ancestry.nearest_flagged(tree.parent, tree.depth, client)
    nearest_server = ancestry.nearest_flagged(tree.parent, tree.depth, server)
    inner = calls[~engine]
    above = np.maximum(tree.parent[inner], 0)
    outer = np.where(tree.parent[inner] >= 0, nearest_client[above], -1)
    hop = np.where(tree.parent[inner] >= 0, nearest_server[above], -1)
    crossing = (outer >= 0) & (hop >= 0) & (tree.depth[np.maximum(hop, 0)] > tree.depth[np.maximum(outer, 0)])
    unit = client.copy()
    unit[outer[crossing]] = False
    index = np.arange(tree.size, dtype=np.int64)
    key = np.where(unit, (tree.depth.astype(np.int64) << 32) | index, np.iinfo(np.int64).max)
    shallowest = ancestry.reduce_to_root(tree.parent, key, np.minimum)
    owner = np.where(shallowest < np.iinfo(np.int64).max, shallowest & 0xFFFFFFFF, -1)[calls]
    return np.where(engine & (owner < 0), calls, np.where(client[calls] & ~unit[calls], -1, owner))
