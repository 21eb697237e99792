"""The Conversations page's builders without a browser: the turns timeline places each turn at its start with its
stages end to end, context growth stacks cached and uncached input, the turn table marks the slowest turn and links
every turn's trace, the list links each conversation and shows an unpriced cost as such."""

from __future__ import annotations

import polars as pl
from dash import dcc, html

from analysis import STAGES
from dashboards.conversation_panels import (
    NO_CONVERSATION,
    context_growth_figure,
    conversation_href,
    conversation_table,
    turn_table,
    turns_timeline_figure,
)
from query.conversations import Conversation, total_cost
from units import NS_PER_MS as MS

T0 = 1_700_000_000_000_000_000


def turns() -> pl.DataFrame:
    """Two turns: 300 ms (100 agent + 200 llm.call) at T0, then 500 ms (400 llm.call + 100 tool) 1 s later."""
    stages = {f"{stage}_ns": [0, 0] for stage in STAGES}
    stages |= {"agent_ns": [100 * MS, 0], "llm.call_ns": [200 * MS, 400 * MS], "tool_ns": [0, 100 * MS]}
    return pl.DataFrame(
        {
            "trace_id": ["a" * 32, "b" * 32],
            "start_ns": [T0, T0 + 1000 * MS],
            "duration_ns": [300 * MS, 500 * MS],
            **stages,
            "input_tokens": [1000, 1500],
            "output_tokens": [20, 30],
            "cached_input_tokens": [0, 900],
            "llm_calls": [1, 1],
            "cost": [0.01, None],
            "context_growth_tokens": [None, 500],
        }
    )


def components(node: object) -> list[object]:
    """Every component under ``node``, itself included."""
    found = [node]
    children = getattr(node, "children", None)
    for child in children if isinstance(children, list) else [children] if children is not None else []:
        found += components(child)
    return found


def test_timeline_places_each_turn_at_its_start_with_its_stages_end_to_end() -> None:
    figure = turns_timeline_figure(turns())
    bars = {bar.name: (list(bar.base), list(bar.x)) for bar in figure.data}
    # Stages in analysis.STAGES order: agent, tool, llm.call; turn 2 starts 1000 ms after turn 1.
    assert list(bars) == ["agent (orchestration)", "tools", "LLM call (untraced inside)"]
    assert bars["agent (orchestration)"] == ([0.0, 1000.0], [100.0, 0.0])
    assert bars["tools"] == ([100.0, 1000.0], [0.0, 100.0])
    assert bars["LLM call (untraced inside)"] == ([100.0, 1100.0], [200.0, 400.0])
    assert list(figure.data[0].y) == ["turn 1", "turn 2"]


def test_context_growth_stacks_cached_and_uncached_input() -> None:
    cached, uncached, output = context_growth_figure(turns()).data
    assert (list(cached.y), list(uncached.y), list(output.y)) == ([0, 900], [1000, 600], [20, 30])


def test_turn_table_marks_the_slowest_turn_and_links_each_trace() -> None:
    conversation = Conversation("c-1", turns(), "b" * 32, "EUR", truncated=False)
    table = turn_table(conversation, "/ui")
    rows = [c for c in components(table) if isinstance(c, html.Tr) and getattr(c, "className", None)]
    assert [row.className for row in rows] == ["hs-turn-row", "hs-turn-row hs-turn-slowest"]
    links = [c.href for c in components(table) if isinstance(c, dcc.Link)]
    assert links == [f"/ui/trace/{'a' * 32}", f"/ui/trace/{'b' * 32}"]
    texts = [c.children for c in components(rows[1]) if isinstance(c, html.Td)]
    assert texts[0] == "2 · slowest" and "+500" in texts and texts[-1] == "—"


def test_a_turn_without_a_price_leaves_the_conversation_unpriced() -> None:
    assert total_cost(turns()) is None
    assert total_cost(turns().with_columns(pl.Series("cost", [0.01, 0.02]))) == 0.03
    assert total_cost(turns().with_columns(pl.Series("llm_calls", [1, 0]))) == 0.01


def test_the_list_links_each_conversation_and_says_when_there_is_none() -> None:
    rows = pl.DataFrame(
        {
            "conversation_id": ["a/b c"],
            "service": ["agent"],
            "turns": [2],
            "first_start_ns": [T0],
            "last_start_ns": [T0 + MS],
            "duration_ns": [800 * MS],
            "input_tokens": [2500],
            "output_tokens": [50],
            "cached_input_tokens": [900],
            "cost": [None],
        }
    )
    table = conversation_table(rows, "EUR", lambda c: conversation_href("/ui", c))
    (link,) = [c for c in components(table) if isinstance(c, dcc.Link)]
    assert link.href == "/ui/conversations/a%2Fb%20c"
    empty = conversation_table(rows.clear(), "EUR", str)
    assert isinstance(empty, html.P) and empty.children == NO_CONVERSATION
