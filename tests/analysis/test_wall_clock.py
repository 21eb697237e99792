"""The wall-clock profiler's view (analysis.wall_clock) against a brute-force sweep on random trees."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

import pytest
from analysis_support import S, by_span, frame, random_traces
from hypothesis import given, settings

from analysis.decomposition import span_attributions
from analysis.trace_analysis import analyze


def brute_force(spans: list[S]) -> dict[str, float]:
    """Each elementary interval of the root split equally among the deepest active spans, spans taken as
    the critical path sees them (cut to their ancestors; FOLLOWS_FROM and outside subtrees left out), in the
    analysis tree (wrapped siblings under their wrappers, analysis.wrappers)."""
    tree = analyze(frame(spans)).tree
    clamped = tree.clamped
    ids = tree.spans["span_id"].to_list()
    live = [i for i in range(tree.size) if tree.in_primary_tree[i] and not clamped.excluded[i]]
    cuts = sorted({int(t) for i in live for t in (clamped.start_ns[i], clamped.end_ns[i])})
    shares: dict[str, float] = defaultdict(float)
    for left, right in pairwise(cuts):
        active = [i for i in live if clamped.start_ns[i] <= left and right <= clamped.end_ns[i]]
        deepest = max(tree.depth[i] for i in active)
        winners = [i for i in active if tree.depth[i] == deepest]
        for i in winners:
            shares[ids[i]] += (right - left) / len(winners)
    return shares


@settings(max_examples=100, deadline=None)
@given(random_traces())
def test_matches_a_brute_force_sweep(spans: list[S]) -> None:
    ours = by_span(span_attributions(frame(spans)), "wall_clock_ns")
    expected = brute_force(spans)
    assert {span: value for span, value in ours.items() if value} == pytest.approx(
        {span: value for span, value in expected.items() if value}
    )
    # Per trace the shares sum to the request's window (the root's, or the envelope of a root that never ended).
    tree = analyze(frame(spans)).tree
    root = int(tree.primary_root[0])
    assert sum(ours.values()) == pytest.approx(tree.end_ns[root] - tree.start_ns[root])
