"""Which rows a reader sees (``query.trace_rows``): collapse modes, toggles, aggregation of repeated siblings,
search, and the window of columns sent to the browser."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from span_frames import spans_frame

from analysis.stage_rules import load_stage_rules
from query import trace_rows
from query.trace_model import TraceView, build_trace_view
from query.trace_rows import (
    AGGREGATE,
    COLLAPSED,
    CRITICAL,
    MATCH,
    PARENT,
    Expansion,
    lane_window,
    position_of,
    visible,
    window,
)
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader
from storage.tenancy import ALL_TENANTS
from storage.writer import ClickHouseTraceWriter
from synthetic_traces import agent_trace

RULES = load_stage_rules()
"""Read once: reading the packaged rule table costs more than analysing a small trace."""
BIG_TRACE = "5ca1ab1e" * 4
# a [0,100] -> b [10,60] -> c [20,30]; a -> d [70,90] -> e [75,80]
TREE = [("a", "", 0, 100), ("b", "a", 10, 50), ("c", "b", 20, 10), ("d", "a", 70, 20), ("e", "d", 75, 5)]


@pytest.fixture(scope="module")
def small() -> TraceView:
    return build_trace_view("ab" * 16, spans_frame(TREE), RULES)


@pytest.fixture
def big(store: ClickHouse, reader: ClickHouseTraceReader) -> TraceView:
    ClickHouseTraceWriter(store).write(agent_trace(10_000))
    return build_trace_view(BIG_TRACE, reader.trace(BIG_TRACE, tenant=ALL_TENANTS), RULES)


def names(view: TraceView, expansion: Expansion) -> list[str]:
    return [view.spans["span_id"][int(view.order[row])] for row in visible(view, expansion).rows]


def test_modes_and_toggles(small: TraceView) -> None:
    index = {span_id: small.span_index(span_id) for span_id in "abcde"}
    assert names(small, Expansion()) == ["a", "b", "c", "d", "e"]
    assert names(small, Expansion(mode="depth", depth=1)) == ["a", "b", "d"]
    assert names(small, Expansion(mode="depth", depth=0)) == ["a"]
    assert names(small, Expansion(toggled=frozenset({index["b"]}))) == ["a", "b", "d", "e"]
    # A toggle flips the mode's choice: in depth mode it opens a collapsed span.
    assert names(small, Expansion(mode="depth", depth=1, toggled=frozenset({index["d"]}))) == ["a", "b", "d", "e"]
    # A leaf cannot be collapsed; toggles beyond the trace are ignored.
    assert names(small, Expansion(toggled=frozenset({index["c"], 99, -1}))) == ["a", "b", "c", "d", "e"]


def test_expand_the_critical_path_opens_only_spans_on_it(small: TraceView) -> None:
    # The path walks a [90,100], d [70,90] (e [75,80] inside it), then b [10,60]: every span here is on it.
    assert small.on_critical_path.all()
    # b, a remote call lasting as long as a, is the path; c runs beside it (a CLIENT span is no wrapper that
    # would adopt c, analysis.wrappers).
    spans = spans_frame([("a", "", 0, 100), ("b", "a", 0, 100), ("c", "a", 10, 20), ("x", "c", 12, 5)])
    spans = spans.with_columns(pl.Series("kind", ["Server", "Client", "Internal", "Internal"]))
    view = build_trace_view("ab" * 16, spans, RULES)
    assert names(view, Expansion(mode="critical")) == ["a", "b", "c"]  # c is off the path: collapsed
    first = window(view, Expansion(mode="critical"), 0, 10)["rows"]
    assert [bool(flag & CRITICAL) for flag in first["flags"]] == [True, True, False]  # type: ignore[index]
    assert [bool(flag & COLLAPSED) for flag in first["flags"]] == [False, False, True]  # type: ignore[index]
    assert first["hidden"] == [0, 0, 1]  # type: ignore[index]


def test_window_columns(small: TraceView) -> None:
    page = window(small, Expansion(), 1, 3)
    assert (page["total"], page["offset"]) == (5, 1)
    rows = page["rows"]
    assert rows["name"] == ["op-b", "op-c", "op-d"]  # type: ignore[index]
    assert rows["start"] == [10, 20, 70] and rows["end"] == [60, 30, 90]  # type: ignore[index]
    assert rows["depth"] == [1, 2, 1] and rows["count"] == [1, 1, 1]  # type: ignore[index]
    assert [bool(flag & PARENT) for flag in rows["flags"]] == [True, False, True]  # type: ignore[index]
    # Untraced stretches of b (around c) and d (around e), by window row.
    gaps = page["gaps"]
    assert list(zip(gaps["row"], gaps["start"], gaps["end"], strict=True)) == [  # type: ignore[index]
        (0, 10, 20),
        (0, 30, 60),
        (2, 70, 75),
        (2, 80, 90),
    ]
    json.dumps(page)  # plain JSON: what Dash sends to the browser
    with pytest.raises(ValueError):
        window(small, Expansion(), -1, 3)
    with pytest.raises(ValueError):
        window(small, Expansion(), 0, trace_rows.MAX_WINDOW_ROWS + 1)


def test_expansion_parse() -> None:
    parsed = Expansion.parse({"mode": "depth", "depth": 3, "toggled": [4, 5], "opened": [7], "search": "x"})
    assert parsed == Expansion(
        mode="depth", depth=3, toggled=frozenset({4, 5}), opened=frozenset({7}), search="x", aggregate=True
    )
    assert Expansion.parse(None) == Expansion()
    for bad in ({"mode": "sideways"}, {"depth": -1}, {"toggled": "1,2"}, {"toggled": ["x"]}):
        with pytest.raises(ValueError):
            Expansion.parse(bad)


def test_repeated_siblings_are_one_row_until_opened(big: TraceView) -> None:
    assert big.size > trace_rows.AGGREGATE_ABOVE
    first = window(big, Expansion(), 0, 10)
    rows = first["rows"]
    assert first["total"] == 3
    assert rows["name"] == ["POST /v1/agent", "invoke_agent planner", "agent.step"]  # type: ignore[index]
    assert rows["count"][2] == 499 and rows["flags"][2] & AGGREGATE  # type: ignore[index]
    assert rows["hidden"][2] == big.size - 3  # type: ignore[index]
    assert len(first["density"]["bins"]) == 1 and max(first["density"]["bins"][0]) == 1.0  # type: ignore[index]
    step = rows["span"][2]  # type: ignore[index]
    opened = window(big, Expansion(opened=frozenset({step})), 0, 12)
    # Each step now shows its children; its 15 queries stay one row.
    assert opened["total"] == 2 + 499 * 6
    assert opened["rows"]["name"][2:8] == [  # type: ignore[index]
        "agent.step",
        "chat llama-3-8b",
        "llm_request",
        "execute_tool search",
        "SELECT documents",
        "parse_output",
    ]
    assert opened["rows"]["count"][6] == 15  # type: ignore[index]
    # The vLLM span's row carries its five phases.
    pieces = opened["pieces"]
    assert pieces["row"][:5] == [4] * 5 and len(set(pieces["stage"][:5])) == 5  # type: ignore[index]
    assert set(pieces["row"]) == {4, 10}  # the two vLLM spans among the 12 rows
    assert window(big, Expansion(aggregate=False), 0, 10)["total"] == big.size


def test_search_reveals_counts_and_positions_matches(big: TraceView) -> None:
    found = window(big, Expansion(search="0000000300000003"), 0, 50)
    assert found["matches"]["count"] == 1  # type: ignore[index]
    (position,) = found["matches"]["positions"]  # type: ignore[index]
    assert position_of(big, Expansion(search="0000000300000003"), big.span_index("0000000300000003")) == position
    # The match lies inside the third step: its group was opened and its ancestors shown.
    assert found["rows"]["name"][position] == "llm_request"  # type: ignore[index]
    assert found["rows"]["flags"][position] & MATCH  # type: ignore[index]
    many = window(big, Expansion(search="llm_request"), 0, 50)
    assert many["matches"]["count"] == 499  # type: ignore[index]
    assert len(many["matches"]["positions"]) == 499  # type: ignore[index]
    assert position_of(big, Expansion(), big.span_index("0000000300000003")) is None  # hidden in the aggregate


def test_lane_window_is_exact_when_it_can_be_and_binned_when_not(small: TraceView, big: TraceView) -> None:
    exact = lane_window(small, 0, 100, 1_000)
    assert exact["start"][0] == 0 and exact["end"][-1] == 100
    assert sum(e - s for s, e in zip(exact["start"], exact["end"], strict=True)) == 100
    binned = lane_window(big, 0, big.duration_ns, 100)
    assert 1 <= len(binned["stage"]) <= 100
    assert np.all(np.diff(binned["start"]) > 0)
    zoomed = lane_window(big, 0, big.duration_ns // 1_000, 100)
    assert zoomed["start"][0] >= 0 and zoomed["end"][-1] <= big.duration_ns // 1_000
