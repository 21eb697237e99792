"""Claude Code's traces (``CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1``): one turn of its agent loop, two model
requests around one tool call, decomposed by the default stage table.

The spans have the names, kind (INTERNAL), ``span.type`` and attributes Claude Code 2.1 writes (code.claude.com,
"Monitoring"; public redacted exports of 2.1.138 and 2.1.266): no ``gen_ai.operation.name`` on the model request,
bare Anthropic usage counts (``input_tokens`` leaves out cache reads and writes), ``ttft_ms`` in ms. Timings are
those of a published 2.1.138 export: a request of 2,225 ms whose first token came after 2,166 ms, a Bash tool call
of 69 ms of which 7 ms waited on the permission decision and 62 ms ran. The expected split is summed here from
those figures, not read from Hotspan. Qwen Code and its forks write the same tree under their own prefix
(``qwen-code.llm_request`` ...), which the split must not depend on.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl
import pytest
from analysis_support import S, frame

from analysis.decomposition import stage_breakdown, wall_clock_breakdown
from analysis.model_calls import model_calls
from analysis.trace_analysis import analyze
from units import NS_PER_MS as MS

SERVICE = "claude-code"
REQUEST_MS, TTFT_MS = 2_225, 2_166
TOOL_MS, BLOCKED_MS, RUN_MS = 69, 7, 62
GAP_MS = 5
"""The loop's own time before, between and after the steps."""


def _request(span_id: str, start_ms: int, usage: dict[str, str], product: str) -> S:
    attributes = {
        "model": "claude-haiku-4-5-20251001",
        "gen_ai.system": "anthropic",
        "gen_ai.request.model": "claude-haiku-4-5-20251001",
        "duration_ms": str(REQUEST_MS),
        "ttft_ms": str(TTFT_MS),
        "success": "true",
        "attempt": "1",
    } | usage
    if product == "claude_code":
        attributes["span.type"] = "llm_request"
    else:
        # Qwen Code also writes the first token's delay in seconds under the key Strands fills in ms.
        attributes["gen_ai.server.time_to_first_token"] = str(TTFT_MS / 1000)
    start = start_ms * MS
    name = f"{product}.llm_request"
    return S(span_id, "turn", start, start + REQUEST_MS * MS, name, SERVICE, "Internal", attributes)


def _turn(product: str = "claude_code") -> list[S]:
    first_end = GAP_MS + REQUEST_MS
    tool_start = first_end + GAP_MS
    tool_end = tool_start + TOOL_MS
    second_start = tool_end + GAP_MS
    end = second_start + REQUEST_MS + GAP_MS
    tool = {"span.type": "tool", "tool_name": "Bash", "duration_ms": str(TOOL_MS)}
    return [
        S("turn", "", 0, end * MS, f"{product}.interaction", SERVICE, "Internal", {"span.type": "interaction"}),
        _request(
            "ask1",
            GAP_MS,
            {"input_tokens": "387", "output_tokens": "18", "cache_read_tokens": "0", "cache_creation_tokens": "0"},
            product,
        ),
        S("tool", "turn", tool_start * MS, tool_end * MS, f"{product}.tool", SERVICE, "Internal", tool),
        S(
            "wait",
            "tool",
            tool_start * MS,
            (tool_start + BLOCKED_MS) * MS,
            f"{product}.tool.blocked_on_user",
            SERVICE,
            "Internal",
            {"span.type": "tool.blocked_on_user", "decision": "accept", "source": "config"},
        ),
        S(
            "run",
            "tool",
            (tool_start + BLOCKED_MS) * MS,
            tool_end * MS,
            f"{product}.tool.execution",
            SERVICE,
            "Internal",
            {"span.type": "tool.execution", "success": "true"},
        ),
        _request(
            "ask2",
            second_start,
            {
                "input_tokens": "2",
                "output_tokens": "1200",
                "cache_read_tokens": "84562",
                "cache_creation_tokens": "7096",
            },
            product,
        ),
    ]


def _expected_ms() -> dict[str, int]:
    e2e = GAP_MS * 4 + REQUEST_MS * 2 + TOOL_MS
    return {
        "llm.first_token": 2 * TTFT_MS,
        "llm.stream": 2 * (REQUEST_MS - TTFT_MS),
        "tool": RUN_MS,
        # The loop's gaps and the permission wait.
        "agent": e2e - 2 * REQUEST_MS - RUN_MS,
    }


@pytest.mark.parametrize("product", ["claude_code", "qwen-code"])
@pytest.mark.parametrize("view", [stage_breakdown, wall_clock_breakdown])
def test_a_turn_splits_into_the_model_requests_the_tool_and_the_loop(
    view: Callable[[pl.DataFrame], pl.DataFrame], product: str
) -> None:
    breakdown = view(frame(_turn(product)))
    got = {row["stage"]: round(row["duration_ns"] / MS) for row in breakdown.iter_rows(named=True)}
    assert got == _expected_ms()


def test_usage_counts_every_prompt_token_and_the_first_token_is_read_in_ms() -> None:
    calls = model_calls(analyze(frame(_turn()))).sort("start_ns")
    assert calls["outermost"].to_list() == [True, True]
    # Anthropic's input_tokens leaves out the cache: 2 + 84,562 read + 7,096 written were the prompt.
    assert calls["input_tokens"].to_list() == [387, 2 + 84_562 + 7_096]
    assert calls["cached_input_tokens"].to_list() == [0, 84_562]
    assert calls["output_tokens"].to_list() == [18, 1_200]
    assert calls["ttft_ns"].to_list() == [TTFT_MS * MS, TTFT_MS * MS]
    assert calls["model"].to_list() == ["claude-haiku-4-5-20251001"] * 2
