"""event_loop_blocking: a synchronous call that freezes the agent's event loop for every other request."""

from __future__ import annotations

import diagnosis_cases as cases
import pytest
from diagnosis_support import Chat, Request, build_all, by_cause, diagnose
from pydantic import ValidationError

from diagnosis.rules.event_loop_blocking import EventLoopBlockingConfig
from diagnosis.table import default_rule_table


def test_blocking_tool_calls_freeze_the_process() -> None:
    # Each tool call holds the loop while the previous request's LLM answer waits 35 ms to be read.
    finding = by_cause(diagnose(cases.loop_blocking(35.0)))["event_loop_blocking"]
    evidence = finding.evidence
    assert evidence["operation_name"] == "POST /v1/tools/catalogue_lookup"
    assert evidence["service_name"] == "agent"
    assert evidence["frozen_call_count"] == evidence["eligible_call_count"] == 7
    assert evidence["stall_ms_total"] > 7 * 25
    assert finding.severity == "critical"


def test_a_free_loop_handles_answers_during_the_call() -> None:
    assert "event_loop_blocking" not in by_cause(diagnose(cases.loop_blocking(0.5)))


def test_an_idle_loop_is_not_a_blocked_one() -> None:
    # Every other request waits on a 400 ms generation during each tool call: nothing to do, nothing frozen.
    assert "event_loop_blocking" not in by_cause(diagnose(cases.idle_loop()))


def test_one_blocking_instance_beside_a_free_one_is_judged_on_its_own() -> None:
    # A rolling deploy: the new version's instance calls the tool with a blocking client, the old one's does not.
    # Pooled by service, half the eligible calls froze; per process, every call of the new instance did.
    spans = cases.loop_blocking(35.0, agent_instance="agent-new") + cases.loop_blocking(
        0.5, first_trace=100, agent_instance="agent-old"
    )
    evidence = by_cause(diagnose(spans))["event_loop_blocking"].evidence
    assert evidence["service_instance_name"] == "agent-new"
    assert evidence["frozen_call_count"] == evidence["eligible_call_count"] == 7


def test_a_blocking_call_that_costs_next_to_nothing_is_info() -> None:
    # The same blocking tool calls, but each request then waits 20 s on a long generation: 7 stalls of about 35 ms
    # in 160 s of requests are worth knowing, not a warning (as when every other request queues at a saturated engine).
    answer = {"prefill_ms": 5.0, "decode_ms": 25.0, "queue_ms": 0.1, "response_lag_ms": 35.0}
    spans = build_all(
        Request(
            trace=i,
            start_ms=i * 60.0,
            retrieval_top_k=None,
            tool_ms=50.0,
            chats=(Chat(prompt=f"q{i}", **answer), Chat(prompt=f"long {i}", decode_ms=20_000.0)),
        )
        for i in range(8)
    )
    finding = by_cause(diagnose(spans))["event_loop_blocking"]
    assert finding.evidence["frozen_call_count"] == finding.evidence["eligible_call_count"] == 7
    assert finding.evidence["stall_share"] < 0.01
    assert finding.severity == "info"


def test_the_warning_stall_share_may_not_exceed_the_critical_one() -> None:
    config = default_rule_table().config("event_loop_blocking").model_dump()
    with pytest.raises(ValidationError, match="stall_share_critical must be >= stall_share_warning"):
        EventLoopBlockingConfig.model_validate(config | {"stall_share_warning": 0.3, "stall_share_critical": 0.2})
