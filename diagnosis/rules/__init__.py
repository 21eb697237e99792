"""The diagnosis rules, one module each, registered by cause name (the key of the rule table)."""

from __future__ import annotations

from typing import Any

from diagnosis.rules.admission_tier_starvation import AdmissionTierStarvation
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.rules.connection_setup_per_request import ConnectionSetupPerRequest
from diagnosis.rules.context_growth import ContextGrowth
from diagnosis.rules.cpu_contention import CpuContention
from diagnosis.rules.decode_bound import DecodeBound
from diagnosis.rules.event_loop_blocking import EventLoopBlocking
from diagnosis.rules.llm_bound import LlmBound
from diagnosis.rules.orchestration_cpu_hotspot import OrchestrationCpuHotspot
from diagnosis.rules.oversized_payload import OversizedPayload
from diagnosis.rules.prefix_cache_unused import PrefixCacheUnused
from diagnosis.rules.prompt_cache_unused import PromptCacheUnused
from diagnosis.rules.provider_throttling import ProviderThrottling
from diagnosis.rules.queue_saturation import QueueSaturation
from diagnosis.rules.redundant_llm_calls import RedundantLlmCalls
from diagnosis.rules.repeated_tool_calls import RepeatedToolCalls
from diagnosis.rules.retrieval_topk_blowup import RetrievalTopkBlowup
from diagnosis.rules.sequential_llm_calls import SequentialLlmCalls
from diagnosis.rules.slow_first_token import SlowFirstToken
from diagnosis.rules.tokenizer_cold_start import TokenizerColdStart

RULES: dict[str, type[Rule[Any]]] = {
    rule.cause: rule
    for rule in (
        QueueSaturation,
        PrefixCacheUnused,
        TokenizerColdStart,
        ConnectionSetupPerRequest,
        DecodeBound,
        OrchestrationCpuHotspot,
        RedundantLlmCalls,
        RetrievalTopkBlowup,
        EventLoopBlocking,
        CpuContention,
        LlmBound,
        SequentialLlmCalls,
        ContextGrowth,
        PromptCacheUnused,
        RepeatedToolCalls,
        SlowFirstToken,
        ProviderThrottling,
        OversizedPayload,
        AdmissionTierStarvation,
    )
}
"""Every rule class by its cause name."""

CLIENT_SIDE_CAUSES: frozenset[str] = frozenset(
    {
        LlmBound.cause,
        SequentialLlmCalls.cause,
        ContextGrowth.cause,
        PromptCacheUnused.cause,
        RepeatedToolCalls.cause,
        RedundantLlmCalls.cause,
        SlowFirstToken.cause,
        ProviderThrottling.cause,
    }
)
"""The causes found from client-side spans alone (no engine span, no engine metric): what any LLM or agent
instrumentation records is enough for them."""

LATENCY_SHARE_EVIDENCE: dict[str, str] = {
    cause: rule.latency_share for cause, rule in RULES.items() if rule.latency_share is not None
}
"""Cause -> the evidence key of its finding holding the share (0..1) of end-to-end latency it accounts for
(:attr:`Rule.latency_share`), for the rules that measure one."""

CAUSE_STAGES: dict[str, str] = {cause: rule.stage for cause, rule in RULES.items() if rule.stage is not None}
"""Cause -> the stage whose share of latency its finding reports (:attr:`Rule.stage`), where it is one stage's."""

__all__ = ["CAUSE_STAGES", "CLIENT_SIDE_CAUSES", "LATENCY_SHARE_EVIDENCE", "RULES", "Rule", "RuleConfig"]
