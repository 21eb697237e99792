"""``repeated_tool_calls``: a request runs the same tool with the same arguments more than once.

Client-side signal: tool calls are the outermost spans of the ``tool_stages`` stages (GenAI ``execute_tool``,
OpenInference ``TOOL``, Traceloop ``tool``, Vercel ``ai.toolCall``, Langfuse ``tool`` ... as the stage table
names them) whose instrumentation captured the arguments (:func:`diagnosis.call_content.tool_call_signature`:
``gen_ai.tool.call.arguments``, OpenInference's ``input.value`` ...); a tool call without captured arguments
cannot be told equal to another and is left out. Within a trace, a call with the same tool name and the same
argument text as an earlier one is a repeat, unless that earlier call failed (then it is a retry). Cost: the
critical-path time of the repeats' subtrees.

Repeated *model* calls are ``redundant_llm_calls``; together the two rules cover identical tool and LLM calls
repeated within one request.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import Field

from diagnosis.call_content import tool_call_signature
from diagnosis.context import DiagnosisContext
from diagnosis.findings import EXAMPLE_TRACES, Finding, confidence, margin, ms, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import nearest_marked, subtree_critical_ns, top_traces

SEPARATOR = "\x1f"


class RepeatedToolCallsConfig(RuleConfig):
    tool_stages: list[str] = Field(min_length=1, description="Stages whose outermost spans are tool calls.")
    affected_share_warning: float = Field(
        gt=0,
        le=1,
        description="Share (0..1) of requests with tool calls (arguments captured) that repeat one, at which the "
        "repetition is the agent's habit rather than a user asking twice.",
    )
    wasted_share_critical: float = Field(
        gt=0,
        le=1,
        description="Critical-path time of the repeated calls as a share (0..1) of end-to-end latency that makes "
        "it critical.",
    )
    min_requests: int = Field(ge=1, description="Requests with tool calls (arguments captured) needed. Count.")
    full_confidence_requests: int = Field(
        ge=2, description="Affected requests at which the sample no longer limits confidence. Count."
    )


class RepeatedToolCalls(Rule[RepeatedToolCallsConfig]):
    """See the module docstring."""

    cause = "repeated_tool_calls"
    config_model = RepeatedToolCallsConfig

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        calls = self._tool_calls(ctx)
        requests = calls["trace_id"].n_unique()
        if requests < config.min_requests:
            return None
        ranked = calls.sort("start_ns", "index").with_columns(
            (pl.int_range(pl.len()).over("trace_id", "signature") > 0).alias("repeat"),
            (pl.col("status_code").shift(1).over("trace_id", "signature") == "Error").fill_null(False).alias("retry"),
        )
        repeats = ranked.filter(pl.col("repeat") & ~pl.col("retry"))
        if repeats.height == 0:
            return None
        affected = repeats["trace_id"].n_unique()
        affected_share = affected / requests
        if affected_share < config.affected_share_warning:
            return None
        wasted = subtree_critical_ns(ctx.parent, ctx.spans, repeats["index"].to_numpy())
        wasted_share = ctx.critical_share(float(wasted["wasted_ns"].sum()))
        severity = "critical" if wasted_share >= config.wasted_share_critical else "warning"
        base = 0.85 + 0.15 * margin(affected_share, config.affected_share_warning, 1.0)
        tools = repeats["signature"].str.split(SEPARATOR).list.first().unique().sort().to_list()
        return Finding(
            cause=self.cause,
            title=f"{affected_share:.0%} of requests run the same tool call again ({repeats.height} repeats of "
            f"{', '.join(tools)}, {wasted_share:.0%} of latency)",
            severity=severity,
            confidence=confidence(base, samples=affected, full=config.full_confidence_requests),
            evidence={
                "tool_call_count": calls.height,
                "repeated_call_count": repeats.height,
                "request_count": requests,
                "affected_request_count": affected,
                "affected_request_share": ratio(affected_share),
                "calls_per_signature_count_max": ranked.group_by("trace_id", "signature").len()["len"].max(),
                "tool_names": tools,
                "wasted_share": ratio(wasted_share),
                "wasted_ms_p50": ms(wasted["wasted_ns"].median()),
                "example_trace_ids": top_traces(wasted, "wasted_ns", EXAMPLE_TRACES),
            },
            remedy="Keep a tool's result within a request instead of running it again with the same arguments: "
            "memoize tool calls by (tool, arguments) for the request, give the model the earlier result in its "
            "context so it does not ask again, and retry a tool only when it failed.",
        )

    def _tool_calls(self, ctx: DiagnosisContext) -> pl.DataFrame:
        """The outermost tool spans of the requests with captured arguments: index, trace_id, start_ns,
        status_code, signature (tool name and arguments)."""
        spans = ctx.spans
        tool = spans["stage"].is_in(self.config.tool_stages).to_numpy()
        parent = ctx.parent
        above = np.where(parent >= 0, nearest_marked(parent, tool)[np.maximum(parent, 0)], -1)
        outermost = tool & (above < 0) & spans["in_request"].to_numpy()
        return (
            spans.filter(pl.Series(outermost))
            .select("index", "trace_id", "start_ns", "status_code", tool_call_signature().alias("signature"))
            .filter(pl.col("signature").is_not_null())
        )
