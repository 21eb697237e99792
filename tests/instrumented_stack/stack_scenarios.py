"""Scenario runs shared by the stack tests: a clean or faulty stack, a closed-loop replay, spans and metrics."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from instrumented_stack.capture import InMemorySpans
from instrumented_stack.faults import apply_faults
from instrumented_stack.loadgen import RequestOutcome, UserSettings, replay_closed_loop
from instrumented_stack.planning import Intent
from instrumented_stack.prompts import PromptBuilder
from instrumented_stack.runner import with_speed
from instrumented_stack.stack import Stack, StackConfig
from instrumented_stack.tokenizer import default_tokenizer
from instrumented_stack.tools import ToolsConfig
from instrumented_stack.workload import load_workload

SCENARIO_SPEED = 20.0
TOOL_LATENCY_S = 0.05
"""Catalogue lookup latency in the scenarios: long enough that a blocked event loop shows."""

TOOL_MIX: Mapping[Intent, float] = {"catalogue": 2.0, "calculate": 1.0, "policy": 1.0}


@dataclass(frozen=True, slots=True)
class ScenarioRun:
    """One closed-loop run: its spans, user outcomes and the engine's final ``/metrics`` text."""

    spans: InMemorySpans
    outcomes: list[RequestOutcome]
    metrics: str


def run_scenario(
    config: StackConfig, workload: str, rows: int, users: int, intent_mix: Mapping[Intent, float], seed: int = 7
) -> ScenarioRun:
    """Replay ``rows`` rows of ``workload`` closed-loop with ``users`` users through ``config``."""
    spans = InMemorySpans()
    builder = PromptBuilder(default_tokenizer(), seed, intent_mix)
    prompts = [builder.build(row) for row in load_workload(workload, limit=rows)]
    settings = UserSettings(tenants=config.credentials(("tenant-p0",)))
    with Stack(config, spans) as stack:
        outcomes = asyncio.run(replay_closed_loop(stack.gateway_url, prompts, settings, users=users))
        metrics = httpx.get(f"{stack.urls.engine}/metrics", verify=False).text
    return ScenarioRun(spans, outcomes, metrics)


def scenario_config(faults: tuple[str, ...]) -> StackConfig:
    """The scenarios' clean configuration (slow catalogue lookups, fast engine) with ``faults`` applied."""
    clean = StackConfig(tools=ToolsConfig(lookup_latency_s=TOOL_LATENCY_S))
    return with_speed(apply_faults(clean, faults), SCENARIO_SPEED)
