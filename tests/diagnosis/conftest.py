"""Fixtures of the diagnosis tests: one triggering finding per rule, from the hand-built cases."""

from __future__ import annotations

import diagnosis_cases as cases
import pytest
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
    }
    found = []
    for cause, (spans, metrics) in triggers.items():
        found.append(by_cause(diagnose(spans, metrics))[cause])
    found.append(by_cause(diagnose(build_all(clean_requests())))["tokenizer_cold_start"])
    return found
