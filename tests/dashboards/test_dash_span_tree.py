"""Span tree repair and ordering: every span kept exactly once, broken links become labelled roots."""

from __future__ import annotations

import pytest

from dashboards.span_tree import RootReason, SpanTree, build_span_tree


def _tree(rows: list[tuple[str, str, int]]) -> SpanTree:
    """Tree over ``(span_id, parent_id, start_ns)`` rows."""
    return build_span_tree([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])


def _assert_consistent(tree: SpanTree) -> None:
    """Every row once in the order; parents before children; depth = parent's + 1."""
    assert sorted(tree.order) == list(range(tree.size))
    seen: set[int] = set()
    for row in tree.order:
        parent = tree.parent[row]
        if parent == -1:
            assert tree.depth[row] == 0
            assert tree.root_reason[row] is not RootReason.NONE
        else:
            assert parent in seen
            assert tree.depth[row] == tree.depth[parent] + 1
            assert tree.root_reason[row] is RootReason.NONE
        seen.add(row)


def test_nested_spans_in_depth_first_start_order() -> None:
    tree = _tree([("c2", "a", 30), ("a", "", 0), ("c1", "a", 10), ("g", "c1", 12)])
    _assert_consistent(tree)
    assert tree.order == [1, 2, 3, 0]
    assert tree.depth == [1, 0, 1, 2]
    assert tree.roots() == [1]
    assert tree.children()[1] == [2, 0]


def test_missing_parent_becomes_an_extra_root_after_the_true_root() -> None:
    tree = _tree([("orphan", "gone", 0), ("root", "", 5), ("kid", "orphan", 1)])
    _assert_consistent(tree)
    assert tree.roots() == [1, 0]
    assert tree.root_reason[0] is RootReason.MISSING_PARENT
    assert tree.root_reason[1] is RootReason.ROOT
    assert tree.depth[2] == 1


def test_self_parent_is_a_root() -> None:
    tree = _tree([("a", "a", 0), ("b", "a", 1)])
    _assert_consistent(tree)
    assert tree.root_reason[0] is RootReason.SELF_PARENT
    assert tree.parent[1] == 0


@pytest.mark.parametrize("length", [2, 3, 50])
def test_parent_cycle_is_cut_at_its_earliest_span(length: int) -> None:
    ids = [f"s{i}" for i in range(length)]
    rows = [(ids[i], ids[(i + 1) % length], 100 - i) for i in range(length)]  # s0 → s1 → ... → s0
    rows.append(("leaf", ids[0], 200))
    tree = _tree(rows)
    _assert_consistent(tree)
    earliest = length - 1  # starts are 100 - i, so the last one started first
    assert tree.roots() == [earliest]
    assert tree.root_reason[earliest] is RootReason.PARENT_CYCLE
    assert tree.max_depth == length


def test_cycle_hanging_below_a_root_keeps_the_root_and_the_cycle() -> None:
    tree = _tree([("root", "", 0), ("a", "b", 1), ("b", "a", 2), ("c", "a", 3)])
    _assert_consistent(tree)
    assert tree.roots() == [0, 1]
    assert tree.root_reason[1] is RootReason.PARENT_CYCLE


def test_duplicate_span_ids_are_all_kept_and_children_attach_to_the_first() -> None:
    tree = _tree([("a", "", 0), ("a", "", 1), ("b", "a", 2)])
    _assert_consistent(tree)
    assert tree.duplicate == [False, True, False]
    assert tree.parent[2] == 0
    assert len(tree.roots()) == 2


def test_duplicate_that_names_its_own_id_as_parent_is_a_self_parent() -> None:
    tree = _tree([("a", "", 0), ("a", "a", 1)])
    _assert_consistent(tree)
    assert tree.root_reason[1] is RootReason.SELF_PARENT


def test_fifteen_thousand_deep_chain_without_recursion() -> None:
    depth = 15_000
    ids = [f"{i:016x}" for i in range(depth)]
    tree = build_span_tree(ids, ["", *ids[:-1]], list(range(depth)))
    _assert_consistent(tree)
    assert tree.max_depth == depth - 1
    assert tree.order == list(range(depth))


def test_empty_and_mismatched_inputs() -> None:
    empty = build_span_tree([], [], [])
    assert empty.size == 0 and empty.order == [] and empty.max_depth == -1
    with pytest.raises(ValueError, match="lengths differ"):
        build_span_tree(["a"], [], [0])
