"""Jaeger UI's critical path (analysis.critical_path) on hand-built traces, and against a direct
transcription of Jaeger UI's walk on random trees."""

from __future__ import annotations

import time
from dataclasses import replace
from itertools import pairwise

import polars as pl
from analysis_support import FOLLOWS, T0, S, by_span, frame, random_traces, sections_by_span
from hypothesis import given, settings

from analysis.critical_path import critical_path, critical_path_by_span
from analysis.tree import build_tree


def path_of(spans: list[S]) -> dict[str, list[tuple[int, int]]]:
    return sections_by_span(critical_path(frame(spans)))


def test_parallel_children_only_the_last_finishing_one_is_on_the_path() -> None:
    # a [0,100]; b [10,60] and c [20,80] run in parallel. Last-finishing child of a: c -> a owns [80,100];
    # c has no children: c [20,80]; back in a at t=20 no child ends before 20 -> a [0,20]. b is off the path.
    assert path_of([S("a", "", 0, 100), S("b", "a", 10, 60), S("c", "a", 20, 80)]) == {
        "a": [(0, 20), (80, 100)],
        "c": [(20, 80)],
    }


def test_nesting_walks_back_through_earlier_children() -> None:
    # a [0,100] > b [10,90] > c [20,50], d [60,80].
    # a: LFC b -> a [90,100]. b: LFC d -> b [80,90]; d [60,80]; back in b at 60: c ends 50 < 60 -> b [50,60];
    # c [20,50]; back in b at 20: none -> b [10,20]; back in a at 10: none -> a [0,10]. Total 100.
    path = path_of([S("a", "", 0, 100), S("b", "a", 10, 90), S("c", "b", 20, 50), S("d", "b", 60, 80)])
    assert path == {
        "a": [(0, 10), (90, 100)],
        "b": [(10, 20), (50, 60), (80, 90)],
        "c": [(20, 50)],
        "d": [(60, 80)],
    }


def test_sequential_children_that_touch_are_chained() -> None:
    # b [10,50] ends when c [50,90] starts: b happened before c (CRISP), so the walk takes b next. Jaeger UI
    # (strictly before) would skip b and give a [0,50].
    assert path_of([S("a", "", 0, 100), S("b", "a", 10, 50), S("c", "a", 50, 90)]) == {
        "a": [(0, 10), (90, 100)],
        "b": [(10, 50)],
        "c": [(50, 90)],
    }


def test_a_sub_millisecond_overlap_with_a_millisecond_start_is_trimmed() -> None:
    # A tracer that starts spans on whole milliseconds (the OpenTelemetry JS SDK's Date.now()) makes step b
    # [0.5 ms, 2.0001 ms] overlap the next step c, which starts at 2 ms, by 100 ns. b is cut to end at 2 ms,
    # so the walk chains b before c instead of skipping it.
    ms = 1_000_000
    spans = [S("a", "", 0, 5 * ms), S("b", "a", ms // 2, 2 * ms + 100), S("c", "a", 2 * ms, 4 * ms)]
    assert path_of(spans) == {
        "a": [(0, ms // 2), (4 * ms, 5 * ms)],
        "b": [(ms // 2, 2 * ms)],
        "c": [(2 * ms, 4 * ms)],
    }


def test_overflowing_child_is_cut_to_its_parent() -> None:
    # b [50,150] overflows a [0,100] -> [50,100]; its child c [120,140] then starts after b's cut end -> dropped.
    path = path_of([S("a", "", 0, 100), S("b", "a", 50, 150), S("c", "b", 120, 140)])
    assert path == {"a": [(0, 50)], "b": [(50, 100)]}


def test_child_starting_before_its_parent_is_cut_at_the_parent_start() -> None:
    # b [-20,30] -> [0,30]: a [30,100], b [0,30].
    assert path_of([S("a", "", 0, 100), S("b", "a", -20, 30)]) == {"a": [(30, 100)], "b": [(0, 30)]}


def test_follows_from_child_and_link_only_span_are_not_on_the_root_path() -> None:
    # f is a FOLLOWS_FROM child of a (later-finishing, so it would be the LFC); g under f goes with it.
    # l is a root that only links to a. a's path is a alone; l has a path of its own, outside the root tree.
    spans = [
        S("a", "", 0, 100),
        S("b", "a", 10, 40),
        S("f", "a", 20, 95, links=(("a", FOLLOWS),)),
        S("g", "f", 30, 90),
        S("l", "", 50, 90, links=(("a", {}),)),
    ]
    result = critical_path(frame(spans))
    assert sections_by_span(result.filter("in_primary_tree")) == {"a": [(0, 10), (40, 100)], "b": [(10, 40)]}
    assert sections_by_span(result.filter(~pl.col("in_primary_tree"))) == {"l": [(50, 90)]}


def test_orphans_get_their_own_path_and_every_root_sums_to_its_duration() -> None:
    # o lost its parent: it roots its own tree [20,200] with child p [30,150].
    spans = [S("a", "", 0, 100), S("b", "a", 10, 90), S("o", "gone", 20, 200), S("p", "o", 30, 150)]
    result = critical_path(frame(spans))
    totals = dict(result.group_by("root_span_id").agg(pl.col("duration_ns").sum()).iter_rows())
    assert totals == {"a": 100, "o": 180}
    assert sections_by_span(result.filter(pl.col("root_span_id") == "o")) == {
        "o": [(20, 30), (150, 200)],
        "p": [(30, 150)],
    }


def test_zero_duration_spans_take_no_time() -> None:
    # z [50,50] is the last-finishing child: a [50,100]; z gets an empty section (omitted) but is on the path;
    # back in a at 50: nothing ends before 50 -> a [0,50]. e [100,100] starts at a's end and is dropped.
    spans = [S("a", "", 0, 100), S("z", "a", 50, 50), S("e", "a", 100, 100)]
    per_span = critical_path_by_span(frame(spans))
    assert by_span(per_span, "on_critical_path") == {"a": True, "z": True, "e": False}
    assert by_span(per_span, "critical_path_ns") == {"a": 100, "z": 0, "e": 0}
    assert by_span(per_span, "clamped_start_ns") == {"a": T0, "z": T0 + 50, "e": None}


def test_self_parent_and_cycle_traces_still_sum_to_the_root() -> None:
    # s names itself as parent: a root of its own. In the cycle x <-> y, y started first and is the root.
    self_parent = critical_path(frame([S("a", "", 0, 100), S("c", "a", 10, 20), S("s", "s", 5, 50)]))
    assert self_parent.filter("in_primary_tree")["duration_ns"].sum() == 100
    cycle = critical_path(frame([S("x", "y", 10, 40), S("y", "x", 0, 60)]))
    assert sections_by_span(cycle) == {"y": [(0, 10), (40, 60)], "x": [(10, 40)]}


def test_wrapper_sibling_hides_the_work_from_the_critical_path() -> None:
    # The wrapper trap (analysis/wrappers.py): w [5,90] does the work (children w1 [10,50], w2 [50,85]); g, a childless
    # graphql.execution-like wrapper [2,95], is w's sibling and ends later. Jaeger's rule walks into g:
    # r [95,100], g [2,95], then back in r at 2 nothing ends before 2 -> r [0,2]. The work is off the path.
    spans = [
        S("r", "", 0, 100),
        S("w", "r", 5, 90),
        S("w1", "w", 10, 50),
        S("w2", "w", 50, 85),
        S("g", "r", 2, 95, name="graphql.execution"),
    ]
    assert path_of(spans) == {"r": [(0, 2), (95, 100)], "g": [(2, 95)]}


def test_per_span_view_lists_sections() -> None:
    per_span = critical_path_by_span(frame([S("a", "", 0, 100), S("b", "a", 10, 60), S("c", "a", 20, 80)]))
    assert by_span(per_span, "sections") == {
        "a": [{"start_ns": T0, "end_ns": T0 + 20}, {"start_ns": T0 + 80, "end_ns": T0 + 100}],
        "b": [],
        "c": [{"start_ns": T0 + 20, "end_ns": T0 + 80}],
    }


def test_a_15000_deep_chain_finishes_in_seconds() -> None:
    # s_i spans [i, 30000 - i]: each span's path is its two ends around its only child; the leaf is whole.
    depth = 15_000
    spans = frame(S(f"s{i}", f"s{i - 1}" if i else "", i, 2 * depth - i) for i in range(depth))
    started = time.perf_counter()
    result = critical_path(spans)
    assert time.perf_counter() - started < 5
    assert result["duration_ns"].sum() == 2 * depth
    assert result.height == 2 * (depth - 1) + 1


def test_many_sequential_siblings() -> None:
    # 2,000 back-to-back children with 1 ns gaps: every one is chained, the parent owns the 2,001 gaps.
    children = [S(f"c{i}", "a", 3 * i + 1, 3 * i + 3) for i in range(2000)]
    result = critical_path(frame([S("a", "", 0, 6001), *children]))
    owned = result.group_by("span_id").agg(pl.col("duration_ns").sum())
    assert owned.height == 2001
    assert result["duration_ns"].sum() == 6001


# --- against Jaeger UI's walk -----------------------------------------------------------------------------


def jaeger_walk(spans: list[S]) -> list[tuple[str, int, int]]:
    """A direct, iterative transcription of jaeger-ui's computeCriticalPath after sanitizeOverFlowingChildren
    and getChildOfSpans, for one trace whose first span is the root, with CRISP's happens-before (a child ending
    at the bound counts) instead of Jaeger's strict one."""
    by_id = {s.span_id: s for s in spans}
    children: dict[str, list[str]] = {s.span_id: [] for s in spans}
    for s in spans:
        if s.parent:
            children[s.parent].append(s.span_id)
    root = spans[0].span_id
    # analysis.tree.trim_clock_overlaps, written plainly: a step overlapping its next sibling (a CHILD_OF sibling
    # that lasts and starts on a whole millisecond) by less than a millisecond ends where that sibling starts.
    ends = {s.span_id: s.end for s in spans}
    for kids_of in children.values():
        blocking = sorted((by_id[c] for c in kids_of if not by_id[c].links), key=lambda c: (c.start, c.span_id))
        for earlier, later in pairwise(blocking):
            overlap = earlier.end - later.start
            whole_ms = (T0 + later.start) % 1_000_000 == 0
            if earlier.start < later.start and 0 < overlap < 1_000_000 and whole_ms and later.end > later.start:
                ends[earlier.span_id] = later.start
    by_id = {s.span_id: replace(s, end=ends[s.span_id]) for s in spans}
    interval = {root: (by_id[root].start, by_id[root].end)}
    order, queue = [], [root]
    while queue:
        current = queue.pop()
        order.append(current)
        for child in children[current]:
            s = by_id[child]
            if s.links:
                continue
            p_start, p_end = interval[current]
            if (s.start >= p_start and s.start >= p_end) or (s.start < p_start and s.end <= p_start):
                continue
            interval[child] = (max(s.start, p_start), min(s.end, p_end))
            queue.append(child)
    position = {span: i for i, span in enumerate(sorted(interval, key=lambda x: (by_id[x].start, x)))}
    kids = {
        span: sorted(
            (c for c in children[span] if c in interval), key=lambda c: (-interval[c][1], interval[c][0], position[c])
        )
        for span in interval
    }
    sections: list[tuple[str, int, int]] = []
    current, bound, came_from = root, None, None
    while True:
        start, end = interval[current]
        if bound is None:
            candidate = kids[current][0] if kids[current] else None
            bound = end
        else:
            # CRISP's happens-before: the next child ends at or before the bound, after the one walked last.
            later = kids[current][kids[current].index(came_from) + 1 :]
            candidate = next((c for c in later if interval[c][1] <= bound), None)
        if candidate is not None:
            if interval[candidate][1] != bound:
                sections.append((current, interval[candidate][1], bound))
            current, bound = candidate, None
            continue
        if start != bound:
            sections.append((current, start, bound))
        if current == root:
            return sections
        current, bound, came_from = by_id[current].parent, start, current


@settings(max_examples=300, deadline=None)
@given(random_traces())
def test_matches_jaeger_ui_walk_on_random_trees(spans: list[S]) -> None:
    tree = build_tree(frame(spans))
    result = critical_path(tree)
    ours = sorted((row[0], row[1] - T0, row[2] - T0) for row in result.select("span_id", "start_ns", "end_ns").rows())
    assert ours == sorted(jaeger_walk(spans))
    root = spans[0]
    assert result["duration_ns"].sum() == root.end - root.start


def test_time_ranges_too_wide_to_pack_fall_back_to_ranks() -> None:
    # A root starting at the epoch (0 ns) and ending now: the packed (parent, time) keys would overflow, so
    # times are replaced by their ranks; the path is the same as the walk's.
    spans = [S("a", "", -T0, 100), S("b", "a", -T0 + 5, 50), S("c", "a", 10, 90), S("d", "c", 20, 95)]
    result = critical_path(frame(spans))
    ours = sorted((row[0], row[1] - T0, row[2] - T0) for row in result.select("span_id", "start_ns", "end_ns").rows())
    assert ours == sorted(jaeger_walk(spans))
