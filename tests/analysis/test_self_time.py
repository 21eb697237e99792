"""Self time (analysis.self_time) on hand-built traces."""

from __future__ import annotations

from analysis_support import FOLLOWS, S, by_span, frame

from analysis.self_time import self_time


def self_times(spans: list[S]) -> dict[str, object]:
    return by_span(self_time(frame(spans)), "self_time_ns")


def test_parallel_children_count_once() -> None:
    # a [0,100]; b [10,60] and c [20,80] overlap: union [10,80] = 70 -> a's self time 30.
    assert self_times([S("a", "", 0, 100), S("b", "a", 10, 60), S("c", "a", 20, 80)]) == {"a": 30, "b": 50, "c": 60}


def test_nesting_subtracts_direct_children_only() -> None:
    # a [0,100] > b [10,90] > c [20,50]: a loses b's 80 -> 20; b loses c's 30 -> 50; c keeps 30.
    assert self_times([S("a", "", 0, 100), S("b", "a", 10, 90), S("c", "b", 20, 50)]) == {"a": 20, "b": 50, "c": 30}


def test_gaps_between_children_stay_with_the_parent() -> None:
    # b [10,30], c [50,70]: union 40 -> a 60.
    assert self_times([S("a", "", 0, 100), S("b", "a", 10, 30), S("c", "a", 50, 70)])["a"] == 60


def test_overflowing_child_only_counts_inside_its_parent() -> None:
    # b [80,150] covers a [0,100] only on [80,100]: a 80. d [-10,5] covers [0,5]: a 75 with both.
    assert self_times([S("a", "", 0, 100), S("b", "a", 80, 150)])["a"] == 80
    assert self_times([S("a", "", 0, 100), S("b", "a", 80, 150), S("d", "a", -10, 5)])["a"] == 75


def test_child_outside_its_parent_covers_nothing() -> None:
    assert self_times([S("a", "", 0, 100), S("b", "a", 120, 150), S("c", "a", -40, -10)])["a"] == 100


def test_zero_duration_spans() -> None:
    # z [50,50] covers nothing and has no self time of its own.
    assert self_times([S("a", "", 0, 100), S("z", "a", 50, 50)]) == {"a": 100, "z": 0}


def test_follows_from_child_does_not_reduce_its_parent() -> None:
    # f is a FOLLOWS_FROM child (producer/consumer): Jaeger UI does not count it against a.
    spans = [S("a", "", 0, 100), S("b", "a", 0, 20), S("f", "a", 30, 90, links=(("a", FOLLOWS),))]
    assert self_times(spans) == {"a": 80, "b": 20, "f": 60}


def test_orphans_and_link_only_spans_are_nobody_s_children() -> None:
    spans = [S("a", "", 0, 100), S("o", "gone", 10, 90), S("l", "", 20, 80, links=(("a", {}),))]
    assert self_times(spans) == {"a": 100, "o": 80, "l": 60}


def test_duration_column_and_many_traces() -> None:
    spans = [S("a", "", 0, 100), S("b", "a", 0, 40), S("a", "", 0, 10, trace_id="t2"), S("b", "a", 2, 4, trace_id="t2")]
    result = self_time(frame(spans))
    assert result.select("trace_id", "span_id", "duration_ns", "self_time_ns").rows() == [
        ("t1", "a", 100, 60),
        ("t1", "b", 40, 40),
        ("t2", "a", 10, 8),
        ("t2", "b", 2, 2),
    ]
