"""Fixtures of the diagnosis tests: one triggering finding per rule, from the hand-built cases."""

from __future__ import annotations

import diagnosis_cases as cases
import pytest
from client_cases import Call, Together, Tool, repeat
from diagnosis_support import build_all, by_cause, clean_requests, diagnose

from diagnosis import Finding


@pytest.fixture(scope="session")
def all_findings() -> list[Finding]:
    """Every rule's finding on its trigger case (one each)."""
    triggers = {
        "queue_saturation": (cases.queue_saturation(25.0), None),
        "prefix_cache_unused": (cases.prefix_repeats(60.0), cases.prefix_metrics(30_000, 0)),
        "tokenizer_cold_start": (cases.tokenizer_loads(every_call=True), None),
        "connection_setup_per_request": (cases.connections(10), None),
        "decode_bound": (cases.decode_heavy(batched=True), None),
        "orchestration_cpu_hotspot": (cases.validation(3.0), None),
        "redundant_llm_calls": (cases.repeated_prompts(same=True), None),
        "retrieval_topk_blowup": (cases.retrieval(200, 40.0), None),
        "event_loop_blocking": (cases.loop_blocking(35.0), None),
        "cpu_contention": (cases.busy_host(), None),
        "llm_bound": (repeat(3, [Call(ttft_ms=60.0)] * 3), None),
        "sequential_llm_calls": (
            repeat(3, [Call(input_tokens=604), Call(input_tokens=601), Call(input_tokens=900)]),
            None,
        ),
        "context_growth": (
            repeat(3, [Call(input_tokens=600), Tool(), Call(input_tokens=1300), Tool(), Call(input_tokens=2000)]),
            None,
        ),
        "prompt_cache_unused": (
            repeat(3, [Call(input_tokens=1700, cached_tokens=0), Tool(), Call(input_tokens=1775, cached_tokens=0)]),
            None,
        ),
        "repeated_tool_calls": (repeat(3, [Call(), Tool(), Tool(), Call(input_tokens=700)]), None),
        "slow_first_token": (repeat(3, [Call(duration_ms=1700.0, ttft_ms=1500.0)] * 2), None),
        "provider_throttling": (repeat(3, [Together((Call(attempts=(429, 200)), Call(input_tokens=610)))]), None),
        "oversized_payload": (cases.tool_calls_with({"http.response.body.size": "1800000"}), None),
        "admission_tier_starvation": (cases.tier_window(1, 12, p0_queue_second_ms=60.0), None),
    }
    found = []
    for cause, (spans, metrics) in triggers.items():
        found.append(by_cause(diagnose(spans, metrics))[cause])
    found.append(by_cause(diagnose(build_all(clean_requests())))["tokenizer_cold_start"])
    return found
