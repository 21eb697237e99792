"""A trace view's flame graph (``query.trace_flame``): a tile per span, merged by path above a size, capped."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from span_frames import spans_frame

from analysis.stage_rules import load_stage_rules
from query import trace_flame
from query.trace_flame import trace_flame as flame_of
from query.trace_model import TraceView, build_trace_view

RULES = load_stage_rules()
# a [0,100] with ten children named alike, one after another (5 each), and one c [60,90].
SPANS = [("a", "", 0, 100)] + [(f"x{i}", "a", i * 5, 5) for i in range(10)] + [("c", "a", 60, 30)]


def _view() -> TraceView:
    frame = spans_frame(SPANS, service="api")
    names = pl.Series("name", ["op-a"] + ["op-x"] * 10 + ["op-c"])
    return build_trace_view("ab" * 16, frame.with_columns(names), RULES)


def test_small_traces_get_a_tile_per_span_weighted_by_self_time() -> None:
    flame = flame_of(_view())
    assert flame.height == 13  # the trace's root tile and a tile per span
    assert sorted(flame["span"].to_list()) == list(range(-1, 12))
    assert int(flame.filter(pl.col("parent") == "")["total_ns"][0]) == 100


def test_large_traces_merge_siblings_by_path_and_name_their_longest_span(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_flame, "MERGE_ABOVE", 5)
    view = _view()
    flame = flame_of(view)
    merged = flame.filter(pl.col("label") == "api:op-x").row(0, named=True)
    assert merged["count"] == 10 and merged["total_ns"] == 50
    assert view.spans["name"][merged["span"]] == "op-x"
    monkeypatch.setattr(trace_flame, "MAX_TILES", 3)
    capped = flame_of(view)
    assert capped.height == 3
    assert all(parent in set(capped["id"]) for parent in capped["parent"] if parent)
    assert np.all(capped["total_ns"].to_numpy()[1:] <= capped["total_ns"][0])
