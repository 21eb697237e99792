"""Parent resolution and repairs (analysis.tree) on hand-built traces."""

from __future__ import annotations

import time

import numpy as np
import polars as pl
import pytest
from analysis_support import FOLLOWS, T0, S, by_span, frame

from analysis import ancestry
from analysis.tree import build_tree, span_tree


def test_depth_root_and_parent_of_a_plain_tree() -> None:
    tree = span_tree(frame([S("a", "", 0, 100), S("b", "a", 10, 50), S("c", "b", 20, 30), S("d", "a", 60, 90)]))
    assert by_span(tree, "depth") == {"a": 0, "b": 1, "c": 2, "d": 1}
    assert by_span(tree, "root_span_id") == dict.fromkeys("abcd", "a")
    assert by_span(tree, "parent_span_id") == {"a": "", "b": "a", "c": "b", "d": "a"}
    assert by_span(tree, "root_reason") == {"a": "root", "b": "", "c": "", "d": ""}


def test_orphan_becomes_a_root_of_its_subtree() -> None:
    # "o" names a parent that is not in the trace; its child "p" stays under it.
    tree = span_tree(frame([S("a", "", 0, 100), S("o", "lost", 10, 40), S("p", "o", 15, 20)]))
    assert by_span(tree, "root_reason") == {"a": "root", "o": "orphan", "p": ""}
    assert by_span(tree, "root_span_id") == {"a": "a", "o": "o", "p": "o"}
    assert by_span(tree, "is_primary_root") == {"a": True, "o": False, "p": False}
    assert by_span(tree, "in_primary_tree") == {"a": True, "o": False, "p": False}


def test_self_parent_becomes_a_root() -> None:
    tree = span_tree(frame([S("a", "", 0, 100), S("s", "s", 10, 20)]))
    assert by_span(tree, "root_reason") == {"a": "root", "s": "self_parent"}
    assert by_span(tree, "parent_span_id") == {"a": "", "s": ""}


def test_cycle_is_cut_at_its_earliest_member() -> None:
    # x -> y -> z -> x (each names the next as parent); y starts first, so y becomes the root and the
    # chain hangs below it: y <- x <- z ... i.e. x's parent y, z's parent x. w hangs under z.
    tree = span_tree(frame([S("x", "y", 20, 30), S("y", "z", 10, 60), S("z", "x", 25, 28), S("w", "z", 26, 27)]))
    assert by_span(tree, "root_reason") == {"y": "cycle", "x": "", "z": "", "w": ""}
    assert by_span(tree, "parent_span_id") == {"y": "", "x": "y", "z": "x", "w": "z"}
    assert by_span(tree, "depth") == {"y": 0, "x": 1, "z": 2, "w": 3}


def test_a_reduction_over_a_parent_array_with_a_cycle_raises_instead_of_running_forever() -> None:
    # build_tree cuts the cycles of what was sent; an adjuster's new parents are not cut again, so the reduction
    # itself must not loop: the trace pipeline skips a trace whose analysis raises, but one that never returns
    # stops it. A forest of the same size still resolves.
    with pytest.raises(ValueError, match="cycle through span indices"):
        ancestry.depths_and_roots(np.array([-1, 0, 3, 2], dtype=np.int64))
    depth, root = ancestry.depths_and_roots(np.array([-1, 0, 1, 2], dtype=np.int64))
    assert depth.tolist() == [0, 1, 2, 3] and root.tolist() == [0, 0, 0, 0]


def test_cycle_tie_on_start_goes_to_the_longer_span_then_the_smaller_id() -> None:
    longer = span_tree(frame([S("p", "q", 0, 10), S("q", "p", 0, 50)]))
    assert by_span(longer, "root_reason") == {"p": "", "q": "cycle"}
    same = span_tree(frame([S("q", "p", 0, 10), S("p", "q", 0, 10)]))
    assert by_span(same, "root_reason") == {"p": "cycle", "q": ""}


def test_duplicate_span_ids_keep_the_last_row_and_are_reported() -> None:
    tree = build_tree(frame([S("a", "", 0, 100), S("b", "a", 10, 20), S("b", "a", 10, 70), S("b", "a", 10, 90)]))
    assert tree.size == 2
    assert by_span(tree.frame(), "span_id") == {"a": "a", "b": "b"}
    assert tree.end_ns[tree.spans["span_id"].to_list().index("b")] == T0 + 90
    assert tree.duplicates.to_dicts() == [{"trace_id": "t1", "span_id": "b", "copies": 3}]


def test_same_span_id_in_two_traces_is_not_a_duplicate() -> None:
    tree = build_tree(frame([S("a", "", 0, 10, trace_id="t1"), S("a", "", 0, 10, trace_id="t2")]))
    assert tree.size == 2
    assert tree.duplicates.is_empty()
    assert tree.trace_count == 2


def test_follows_from_child_is_flagged_and_link_only_span_is_a_root() -> None:
    # "f" has parent "a" through a FOLLOWS_FROM reference (Jaeger -> OTLP: parent plus a link tagged
    # follows_from). "l" has no parent and only links to "a": a root of its own, flagged link_only.
    tree = span_tree(
        frame(
            [
                S("a", "", 0, 100),
                S("f", "a", 50, 150, links=(("a", FOLLOWS),)),
                S("l", "", 60, 200, links=(("a", {}),)),
            ]
        )
    )
    assert by_span(tree, "follows_from") == {"a": False, "f": True, "l": False}
    assert by_span(tree, "link_only") == {"a": False, "f": False, "l": True}
    # "l" is longer: a link does not demote a span (issue 27: a 0.1 ms orphan chosen because its longer siblings
    # carried links).
    assert by_span(tree, "is_primary_root") == {"a": False, "f": False, "l": True}


def test_primary_root_prefers_a_genuine_root_then_the_longest() -> None:
    orphan_longer = span_tree(frame([S("r", "", 10, 20), S("o", "gone", 0, 100)]))
    assert by_span(orphan_longer, "is_primary_root") == {"o": False, "r": True}
    orphans_only = span_tree(frame([S("o1", "gone", 0, 30), S("o2", "gone", 5, 100), S("o3", "gone", 0, 100)]))
    # o2 and o3 are equally long; o3 started first.
    assert by_span(orphans_only, "is_primary_root") == {"o1": False, "o3": True, "o2": False}


def test_clamping_cuts_overflowing_children_and_drops_outside_ones_with_their_subtree() -> None:
    # a [0,100]; b [50,150] overflows -> [50,100]; c under b [90,120] -> cut to b's cut end: [90,100];
    # d [100,130] starts at a's end -> dropped, e under d dropped too; g [-20,10] starts early -> [0,10];
    # h [-30,-10] ends before a starts -> dropped.
    tree = build_tree(
        frame(
            [
                S("a", "", 0, 100),
                S("b", "a", 50, 150),
                S("c", "b", 90, 120),
                S("d", "a", 100, 130),
                S("e", "d", 105, 110),
                S("g", "a", -20, 10),
                S("h", "a", -30, -10),
            ]
        )
    )
    clamped = tree.clamped
    ids = tree.spans["span_id"].to_list()
    cut = {
        span: (int(clamped.start_ns[i]) - T0, int(clamped.end_ns[i]) - T0)
        for i, span in enumerate(ids)
        if not clamped.excluded[i]
    }
    assert cut == {"a": (0, 100), "b": (50, 100), "c": (90, 100), "g": (0, 10)}
    assert {span for i, span in enumerate(ids) if clamped.dropped[i]} == {"d", "e", "h"}


def test_many_traces_at_once_keep_their_own_trees() -> None:
    spans = frame(
        [S("r", "", 0, 10, trace_id="t2"), S("c", "r", 1, 2, trace_id="t2"), S("r", "", 0, 50), S("c", "r", 5, 6)]
    )
    tree = build_tree(spans)
    assert tree.spans["trace_id"].to_list() == ["t1", "t1", "t2", "t2"]
    assert tree.parent.tolist() == [-1, 0, -1, 2]
    assert tree.primary_root.tolist() == [0, 2]


def test_attributes_as_key_value_structs_are_accepted() -> None:
    spans = frame([S("a", "", 0, 10, attributes={"k": "v"})]).with_columns(
        pl.col("attributes").map.entries().cast(pl.List(pl.Struct({"key": pl.String, "value": pl.String})))
    )
    assert build_tree(spans).spans["attributes"].dtype == pl.Map(pl.String, pl.String)


def test_missing_columns_are_named() -> None:
    with pytest.raises(ValueError, match=r"\['kind', 'attributes'\]"):
        build_tree(frame([S("a", "", 0, 1)]).drop("kind", "attributes"))


def test_a_15000_deep_chain_resolves_quickly() -> None:
    depth = 15_000
    spans = frame(S(f"s{i}", f"s{i - 1}" if i else "", i, 2 * depth - i) for i in range(depth))
    started = time.perf_counter()
    tree = build_tree(spans)
    clamped = tree.clamped
    assert time.perf_counter() - started < 5
    order = np.argsort(tree.start_ns)
    assert tree.depth[order].tolist() == list(range(depth))
    assert not clamped.excluded.any()
