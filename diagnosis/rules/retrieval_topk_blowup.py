"""``retrieval_topk_blowup``: retrieval asks for far more documents than a prompt can use, and pays for
decoding them.

Retrieval spans are the outermost spans carrying a top-K attribute (``top_k_attributes``) or GenAI
``gen_ai.operation.name=retrieval``. Two signals:

- **top-K far above normal**: the median requested K reaches ``top_k_warning``;
- **deserialization dominates**: spans named like payload decoding (``deserialize_span_names``) below a
  retrieval span take ``deserialize_share_warning`` of its duration (self time).

The cost is the retrieval *call*: the retrieval span together with the transport around it (a SERVER span and
the caller's CLIENT span that only wrap it), so payload serialization and transfer count too; its critical-path
time as a share of end-to-end latency sets the severity (``info`` below ``retrieval_share_warning``).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import Field, model_validator

from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, confidence, ms, ratio, severity_for
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import first_attribute, has_any_attribute, name_matches, nearest_marked, top_traces

WRAPPER_KINDS = ("Server", "Client")
MAX_WRAPPER_HOPS = 4
"""A call crosses at most a client span, a server span and a framework span or two on the way in."""


class RetrievalTopkBlowupConfig(RuleConfig):
    top_k_attributes: list[str] = Field(
        min_length=1,
        description="Attributes holding the requested number of documents, in preference order "
        "(GenAI gen_ai.retrieval.top_k, then common plain names).",
    )
    deserialize_span_names: list[str] = Field(description="Globs naming payload decoding spans.")
    top_k_warning: float = Field(
        gt=0,
        description="Median requested K (documents) that is far above normal. RAG prompts use 3-20 chunks and a "
        "reranker takes 50-100 candidates; at 50 most retrieved documents are decoded, shipped and dropped.",
    )
    deserialize_share_warning: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of the retrieval span's time in payload decoding at which decoding, not search, "
        "is the cost (median over retrievals).",
    )
    retrieval_share_warning: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of end-to-end latency in retrieval calls at which the blow-up costs latency "
        "(a warning); below it the finding is info.",
    )
    retrieval_share_critical: float = Field(
        gt=0, le=1, description="Share (0..1) at which retrieval is a leading stage: critical."
    )
    min_calls: int = Field(ge=1, description="Retrieval calls needed to judge. Count.")
    full_confidence_calls: int = Field(
        ge=2, description="Calls at which the sample no longer limits confidence. Count."
    )

    @model_validator(mode="after")
    def _ordered(self) -> RetrievalTopkBlowupConfig:
        if self.retrieval_share_critical < self.retrieval_share_warning:
            raise ValueError("retrieval_share_critical must be >= retrieval_share_warning")
        return self


class RetrievalTopkBlowup(Rule[RetrievalTopkBlowupConfig]):
    """See the module docstring."""

    cause = "retrieval_topk_blowup"
    config_model = RetrievalTopkBlowupConfig
    latency_share = "retrieval_share"

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        spans = ctx.spans
        parent = ctx.parent
        flagged = spans.select(
            (
                has_any_attribute(config.top_k_attributes)
                | (first_attribute(["gen_ai.operation.name"]) == "retrieval").fill_null(False)
            ).alias("retrieval"),
            name_matches(config.deserialize_span_names).alias("deserialize"),
        )
        marked = flagged["retrieval"].to_numpy()
        # Outermost only: a vector search span inside the retrieval span is part of it.
        above = nearest_marked(parent, marked)[np.maximum(parent, 0)]
        outer = marked & ((parent < 0) | (above < 0))
        index = np.flatnonzero(outer)
        if index.size < config.min_calls:
            return None
        deserialize_ns = self._deserialize_per_retrieval(ctx, outer, flagged["deserialize"].to_numpy())
        roots = _call_roots(ctx, index)
        call_root = np.zeros(spans.height, dtype=bool)
        call_root[roots] = True
        owner = nearest_marked(parent, call_root)
        inside = owner >= 0
        call_critical = np.zeros(spans.height)
        np.add.at(call_critical, owner[inside], spans["critical_path_ns"].to_numpy()[inside])
        calls = (
            spans[index]
            .select(
                "trace_id",
                "duration_ns",
                first_attribute(config.top_k_attributes).cast(pl.Float64, strict=False).alias("top_k"),
                pl.Series("deserialize_ns", deserialize_ns[index]),
                pl.Series("call_ns", spans["duration_ns"].to_numpy()[roots]),
                pl.Series("call_critical_ns", call_critical[roots]),
            )
            .with_columns((pl.col("deserialize_ns") / pl.col("duration_ns")).fill_nan(None).alias("deserialize_share"))
        )
        top_k = calls["top_k"].drop_nulls()
        top_k_p50 = float(top_k.median()) if top_k.len() else None
        deserialize_share = calls["deserialize_share"].drop_nulls().median()
        high_k = top_k_p50 is not None and top_k_p50 >= config.top_k_warning
        decode_heavy = deserialize_share is not None and deserialize_share >= config.deserialize_share_warning
        if not (high_k or decode_heavy):
            return None
        share = ctx.critical_share(float(calls["call_critical_ns"].sum()))
        severity = severity_for(share, config.retrieval_share_warning, config.retrieval_share_critical) or "info"
        base = 0.5 + 0.25 * high_k + 0.25 * decode_heavy
        what = " and ".join(
            part
            for part, present in (
                (f"top_k {top_k_p50:g}" if top_k_p50 is not None else "", high_k),
                (
                    f"decoding {deserialize_share:.0%} of retrieval time" if deserialize_share is not None else "",
                    decode_heavy,
                ),
            )
            if present
        )
        return Finding(
            cause=self.cause,
            title=f"Retrieval blows up: {what}; retrieval calls are {share:.0%} of latency",
            severity=severity,
            confidence=confidence(base, samples=calls.height, full=config.full_confidence_calls),
            evidence={
                "retrieval_call_count": calls.height,
                "top_k_count_p50": top_k_p50,
                "top_k_count_max": float(top_k.max()) if top_k.len() else None,
                "retrieval_ms_p50": ms(calls["duration_ns"].median()),
                "retrieval_call_ms_p50": ms(calls["call_ns"].median()),
                "deserialize_ms_p50": ms(calls["deserialize_ns"].median()),
                "deserialize_share": ratio(deserialize_share),
                "retrieval_share": ratio(share),
                "example_trace_ids": top_traces(calls, "call_critical_ns", EXAMPLE_TRACES),
            },
            remedy="Ask for the documents the prompt actually uses (top_k near the number of context chunks; "
            "rerank a bounded candidate set), return ids and text without stored vectors or unused fields, and "
            "decode payloads once (cache decoded records) or with a faster codec.",
        )

    @staticmethod
    def _deserialize_per_retrieval(ctx: DiagnosisContext, outer: np.ndarray, is_deserialize: np.ndarray) -> np.ndarray:
        """Per span (non-zero on retrieval spans), the self time of decoding spans below it, ns."""
        owner = nearest_marked(ctx.parent, outer)
        owned = is_deserialize & (owner >= 0)
        total = np.zeros(ctx.spans.height)
        np.add.at(total, owner[owned], ctx.spans["self_time_ns"].to_numpy()[owned])
        return total


def _call_roots(ctx: DiagnosisContext, index: np.ndarray) -> np.ndarray:
    """For each retrieval span, the outermost span of its call: climb while the parent is a SERVER or CLIENT
    span whose only child is the current span (it only carries the call)."""
    parent = ctx.parent
    kinds = ctx.spans["kind"].to_numpy()
    children = ctx.spans["child_count"].to_numpy()
    roots = index.copy()
    for _ in range(MAX_WRAPPER_HOPS):
        up = parent[roots]
        climb = (up >= 0) & np.isin(kinds[np.maximum(up, 0)], WRAPPER_KINDS) & (children[np.maximum(up, 0)] == 1)
        if not climb.any():
            break
        roots = np.where(climb, up, roots)
    return roots
