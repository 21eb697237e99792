"""The engine's Prometheus metrics agree with its spans; Mooncake replay exercises the prefix cache."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families
from stack_scenarios import ScenarioRun
from stack_stages import named

Run = Callable[..., ScenarioRun]


def _values(metrics: str) -> dict[str, float]:
    """Sample name (labels dropped, summed) -> value."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if not sample.name.endswith(("_bucket", "_created")):
                values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return values


@pytest.mark.parametrize("workload", ["azure", "mooncake"])
def test_metrics_agree_with_llm_request_spans(workload: str, scenario: Run, mooncake: Run) -> None:
    run = scenario() if workload == "azure" else mooncake()
    spans = named(run.spans, "llm_request")
    values = _values(run.metrics)
    assert len(spans) == len(run.outcomes) > 0
    for histogram in ("e2e_request_latency_seconds", "request_queue_time_seconds", "time_to_first_token_seconds"):
        assert values[f"vllm:{histogram}_count"] == len(spans), histogram
    assert values["vllm:request_success_total"] == len(spans)
    prompt = sum(s.attributes["gen_ai.usage.prompt_tokens"] for s in spans)
    generated = sum(s.attributes["gen_ai.usage.completion_tokens"] for s in spans)
    assert values["vllm:prompt_tokens_total"] == prompt
    assert values["vllm:generation_tokens_total"] == generated
    assert values["vllm:inter_token_latency_seconds_count"] == generated - len(spans)
    for metric, attribute in (
        ("request_queue_time_seconds", "time_in_queue"),
        ("request_prefill_time_seconds", "time_in_model_prefill"),
        ("request_decode_time_seconds", "time_in_model_decode"),
        ("e2e_request_latency_seconds", "e2e"),
        ("time_to_first_token_seconds", "time_to_first_token"),
    ):
        summed = sum(s.attributes[f"gen_ai.latency.{attribute}"] for s in spans)
        assert values[f"vllm:{metric}_sum"] == pytest.approx(summed, abs=1e-6 * len(spans)), metric
    assert values["vllm:num_requests_running"] == values["vllm:num_requests_waiting"] == 0
    assert values["vllm:kv_cache_usage_perc"] == 0


def test_mooncake_replay_hits_the_prefix_cache_only_with_caching(mooncake: Run) -> None:
    """Mooncake rows share their first 512-token block (hash id 0): with caching every later row hits it;
    with ``prefix_cache_off`` nothing is queried or hit (vLLM records no prefix-cache stats then)."""
    cached, off = _values(mooncake().metrics), _values(mooncake("prefix_cache_off").metrics)
    assert all(outcome.ok for outcome in mooncake("prefix_cache_off").outcomes)
    assert cached["vllm:prefix_cache_hits_total"] >= 5 * 512
    assert 0 < cached["vllm:prefix_cache_hits_total"] / cached["vllm:prefix_cache_queries_total"] < 1
    assert off["vllm:prefix_cache_hits_total"] == 0
    assert off["vllm:prefix_cache_queries_total"] == 0
    # Computed tokens per step exclude cache hits: the cache saved exactly its hits.
    assert off["vllm:iteration_tokens_total_sum"] - cached["vllm:iteration_tokens_total_sum"] == pytest.approx(
        cached["vllm:prefix_cache_hits_total"]
    )


def test_mooncake_prompts_have_the_trace_lengths(mooncake: Run) -> None:
    spans = named(mooncake().spans, "llm_request")
    assert sorted(s.attributes["gen_ai.usage.prompt_tokens"] for s in spans) == sorted(
        o.workload.prompt_tokens for o in mooncake().outcomes
    )
