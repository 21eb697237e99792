"""The diagnosis rules, one module each, registered by cause name (the key of the rule table)."""

from __future__ import annotations

from typing import Any

from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.rules.connection_setup_per_request import ConnectionSetupPerRequest
from diagnosis.rules.decode_bound import DecodeBound
from diagnosis.rules.event_loop_blocking import EventLoopBlocking
from diagnosis.rules.orchestration_cpu_hotspot import OrchestrationCpuHotspot
from diagnosis.rules.prefix_cache_unused import PrefixCacheUnused
from diagnosis.rules.queue_saturation import QueueSaturation
from diagnosis.rules.redundant_llm_calls import RedundantLlmCalls
from diagnosis.rules.retrieval_topk_blowup import RetrievalTopkBlowup
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
    )
}
"""Every rule class by its cause name."""

__all__ = ["RULES", "Rule", "RuleConfig"]
