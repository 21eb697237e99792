"""``redundant_llm_calls``: a request sends the same prompt to the model more than once.

The calls are the model calls a request made, whatever instrumentation recorded them
(:attr:`~diagnosis.context.DiagnosisContext.model_calls`: GenAI, OpenInference, OpenLLMetry, Vercel, Langfuse
spans, an HTTP request to a model API, or only vLLM's ``llm_request``). A call's *prompt signature* is its model
plus, in order of strength:

1. a prompt hash attribute (``prompt_hash_attributes``, e.g. the stack's ``llm.prompt.sha256``): equal values
   are equal prompts (strong);
2. the input the instrumentation captured with content capture on (:func:`diagnosis.call_content.input_content`:
   ``gen_ai.input.messages``, OpenInference's ``llm.input_messages.*`` ...): equal text is an equal prompt
   (strong);
3. otherwise its input token count and the values of ``signature_attributes`` (max_tokens, temperature ...;
   absent ones compare equal): equal prompts are likely, not certain (weak; lower confidence), so a weak
   repeat counts only back to back, right after the call it repeats.

Within a trace, a call whose signature matches an earlier call's is redundant unless that earlier call failed
(then it is a retry). Cost: the critical-path time of the redundant calls' subtrees.
"""

from __future__ import annotations

import polars as pl
from pydantic import Field, model_validator

from diagnosis.call_content import input_content
from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, confidence, margin, ms, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import first_attribute, subtree_critical_ns, top_traces

CONTENT_KEY = "input_content"
"""The ``signature_key`` of signatures made from the captured input."""


class RedundantLlmCallsConfig(RuleConfig):
    prompt_hash_attributes: list[str] = Field(
        description="Attributes holding a hash of the whole prompt, in preference order (the GenAI semantic "
        "conventions define none; the stack writes llm.prompt.sha256)."
    )
    signature_attributes: list[str] = Field(
        description="Without a prompt hash or captured input: attributes that, beside the model and the input "
        "token count, must also be equal (request parameters such as max_tokens; absent ones compare equal)."
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
        calls = self._signed(ctx.model_calls)
        requests = calls["trace_id"].n_unique()
        if requests < config.min_requests:
            return None
        previous_failed = pl.col("status_code").shift(1).over("trace_id", "signature") == "Error"
        # A weak repeat must follow the call it repeats directly.
        adjacent = pl.col("position").shift(1).over("trace_id", "signature") == pl.col("position") - 1
        ranked = calls.sort("start_ns").with_columns(
            (pl.int_range(pl.len()).over("trace_id", "signature") > 0).alias("repeat"),
            previous_failed.fill_null(False).alias("retry"),
            adjacent.fill_null(False).alias("adjacent"),
        )
        redundant = ranked.filter(
            pl.col("signature").is_not_null()
            & pl.col("repeat")
            & ~pl.col("retry")
            & (pl.col("strong") | pl.col("adjacent"))
        )
        if redundant.height == 0:
            return None
        affected = redundant["trace_id"].n_unique()
        affected_share = affected / requests
        if affected_share < config.affected_share_warning:
            return None
        wasted = subtree_critical_ns(ctx.parent, ctx.spans, redundant["index"].to_numpy())
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
        model = pl.col("model").fill_null("")
        hashed = first_attribute(config.prompt_hash_attributes)
        captured = input_content()
        content = pl.when(captured.is_not_null()).then(captured.hash().cast(pl.String))
        weak = pl.concat_str(
            [model, pl.col("input_tokens").cast(pl.String)]
            + [first_attribute([key]).fill_null("") for key in config.signature_attributes],
            separator="|",
        )
        hash_name = pl.coalesce(
            *(
                pl.when(pl.col("attributes").map.contains_key(key)).then(pl.lit(key))
                for key in config.prompt_hash_attributes
            ),
            pl.when(content.is_not_null()).then(pl.lit(CONTENT_KEY)),
        )
        strong = pl.coalesce(hashed, content)
        return calls.select(
            "index",
            "trace_id",
            "start_ns",
            "position",
            "status_code",
            pl.coalesce(pl.concat_str([model, strong], separator="|"), weak).alias("signature"),
            strong.is_not_null().alias("strong"),
            pl.coalesce(hash_name, pl.lit("+".join(["model", "input_tokens", *config.signature_attributes]))).alias(
                "signature_key"
            ),
        )
