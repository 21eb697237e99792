"""``redundant_llm_calls``: a request sends the same prompt to the model more than once.

The *prompt signature* of an LLM call is its model plus, in order of strength:

1. a prompt hash attribute (``prompt_hash_attributes``, e.g. the stack's ``llm.prompt.sha256``): equal values
   are equal prompts (strong);
2. otherwise the values of ``signature_attributes`` (input tokens, max_tokens, temperature ...), all present:
   equal values make equal prompts likely, not certain (weak; lower confidence).

LLM calls are the client spans of ``llm_operations`` (GenAI ``gen_ai.operation.name``); a trace with only
engine spans (``llm_request``) is read from those instead. Within a trace, a call whose signature matches an
earlier call is redundant unless that earlier call failed (then it is a retry). Cost: the critical-path time of
the redundant calls' subtrees.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import Field, model_validator

from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, confidence, margin, ms, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import first_attribute, nearest_marked, top_traces

MODEL_KEYS = ("gen_ai.request.model", "gen_ai.response.model")


class RedundantLlmCallsConfig(RuleConfig):
    llm_operations: list[str] = Field(min_length=1, description="gen_ai.operation.name values of a model call.")
    prompt_hash_attributes: list[str] = Field(
        description="Attributes holding a hash of the whole prompt, in preference order (the GenAI semantic "
        "conventions define none; the stack writes llm.prompt.sha256)."
    )
    signature_attributes: list[str] = Field(
        min_length=1,
        description="Without a prompt hash, attributes that together stand for the prompt (all must be present).",
    )
    affected_share_warning: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of requests with LLM calls that send a prompt twice, at which repetition is "
        "systematic: an occasional repeat can be a user asking again, a tenth of requests is the agent's loop.",
    )
    wasted_share_critical: float = Field(
        gt=0,
        le=1,
        description="Critical-path time of the redundant calls as a share (0..1) of end-to-end latency that makes "
        "it critical.",
    )
    min_requests: int = Field(ge=1, description="Requests with LLM calls needed to judge. Count.")
    full_confidence_requests: int = Field(
        ge=2, description="Affected requests at which the sample no longer limits confidence. Count."
    )

    @model_validator(mode="after")
    def _distinct(self) -> RedundantLlmCallsConfig:
        if set(self.prompt_hash_attributes) & set(self.signature_attributes):
            raise ValueError("prompt_hash_attributes and signature_attributes must not overlap")
        return self


class RedundantLlmCalls(Rule[RedundantLlmCallsConfig]):
    """See the module docstring."""

    cause = "redundant_llm_calls"
    config_model = RedundantLlmCallsConfig

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        spans = ctx.spans
        is_call = spans.select(
            first_attribute(["gen_ai.operation.name"]).is_in(config.llm_operations).fill_null(False)
        ).to_series()
        if not is_call.any():
            is_call = spans["index"].is_in(ctx.llm_calls["index"].implode())
        calls = self._signed(spans.filter(is_call))
        requests = calls["trace_id"].n_unique()
        if requests < config.min_requests:
            return None
        previous_failed = pl.col("status_code").shift(1).over("trace_id", "signature") == "Error"
        ranked = calls.sort("start_ns").with_columns(
            (pl.int_range(pl.len()).over("trace_id", "signature") > 0).alias("repeat"),
            previous_failed.fill_null(False).alias("retry"),
        )
        redundant = ranked.filter(pl.col("signature").is_not_null() & pl.col("repeat") & ~pl.col("retry"))
        if redundant.height == 0:
            return None
        affected = redundant["trace_id"].n_unique()
        affected_share = affected / requests
        if affected_share < config.affected_share_warning:
            return None
        wasted = self._wasted(ctx, redundant["index"].to_numpy())
        wasted_share = ctx.critical_share(float(wasted["wasted_ns"].sum()))
        strong = redundant["strong"].all()
        severity = "critical" if wasted_share >= config.wasted_share_critical else "warning"
        base = (0.85 if strong else 0.5) + 0.15 * margin(affected_share, config.affected_share_warning, 1.0)
        per_signature = ranked.group_by("trace_id", "signature").len()["len"].max()
        return Finding(
            cause=self.cause,
            title=f"{affected_share:.0%} of requests send the same prompt to the model more than once "
            f"({redundant.height} redundant calls, {wasted_share:.0%} of latency)",
            severity=severity,
            confidence=confidence(base, samples=affected, full=config.full_confidence_requests),
            evidence={
                "llm_call_count": calls.height,
                "redundant_call_count": redundant.height,
                "request_count": requests,
                "affected_request_count": affected,
                "affected_request_share": ratio(affected_share),
                "calls_per_signature_count_max": per_signature,
                "wasted_share": ratio(wasted_share),
                "wasted_ms_p50": ms(wasted["wasted_ns"].median()),
                "signature_key": redundant["signature_key"].mode().sort().first(),
                "example_trace_ids": top_traces(wasted, "wasted_ns", EXAMPLE_TRACES),
            },
            remedy="Reuse an answer within a request instead of asking again: memoize model calls by (model, "
            "prompt), make the agent loop stop re-sending an unchanged prompt (a reflection or validation step "
            "without new context, a retry after success), and retry only on failure.",
        )

    def _signed(self, calls: pl.DataFrame) -> pl.DataFrame:
        """``calls`` with their prompt signature (null when unknown), whether it is strong, and its key name."""
        config = self.config
        model = first_attribute(MODEL_KEYS).fill_null("")
        hashed = first_attribute(config.prompt_hash_attributes)
        parts = [first_attribute([key]) for key in config.signature_attributes]
        weak = pl.concat_str([model, *parts], separator="|")
        hash_name = pl.coalesce(
            *(
                pl.when(pl.col("attributes").map.contains_key(key)).then(pl.lit(key))
                for key in config.prompt_hash_attributes
            ),
            pl.lit(None, dtype=pl.String),
        )
        return calls.select(
            "index",
            "trace_id",
            "start_ns",
            "status_code",
            pl.coalesce(pl.concat_str([model, hashed], separator="|"), weak).alias("signature"),
            hashed.is_not_null().alias("strong"),
            pl.coalesce(hash_name, pl.lit("+".join(["model", *config.signature_attributes]))).alias("signature_key"),
        )

    @staticmethod
    def _wasted(ctx: DiagnosisContext, redundant: np.ndarray) -> pl.DataFrame:
        """Per affected trace, critical-path ns spent in the redundant calls' subtrees (wasted_ns)."""
        marked = np.zeros(ctx.spans.height, dtype=bool)
        marked[redundant] = True
        inside = nearest_marked(ctx.parent, marked) >= 0
        return (
            ctx.spans.filter(pl.Series(inside))
            .group_by("trace_id")
            .agg(pl.col("critical_path_ns").sum().alias("wasted_ns"))
        )
