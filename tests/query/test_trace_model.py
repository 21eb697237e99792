"""The trace model (``query.trace_model``) on hand-built frames with the awkward cases real traces bring, on every
trace of the shared real captures, and on a generated 10k-span agent trace: the drawn tree, untraced gaps, the
stage lane, groups, search and the minimap."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from span_frames import T0_NS, spans_frame

from analysis import STAGES, stage_breakdown
from analysis.stage_rules import load_stage_rules
from hotspan.importer import StoreSink, import_paths
from query.trace_flame import trace_flame
from query.trace_model import TraceView, build_trace_view
from query.trace_rows import Expansion, window
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader, TraceQuery
from storage.tenancy import ALL_TENANTS
from storage.writer import ClickHouseTraceWriter
from synthetic_traces import agent_trace
from testkit import TRACES
from units import NS_PER_MS as MS

RULES = load_stage_rules()
"""Read once: reading the packaged rule table costs more than analysing a small trace."""
BIG_TRACE = "5ca1ab1e" * 4

EDGE_CASES: dict[str, list[tuple[str, str, int, int]]] = {
    "nested": [("a", "", 0, 100), ("b", "a", 10, 50), ("c", "b", 20, 10), ("d", "a", 70, 20)],
    "orphans": [("root", "", 0, 100), ("o1", "gone", 5, 10), ("o2", "gone", 6, 0), ("k", "o1", 7, 1)],
    "self_parent": [("a", "a", 0, 10), ("b", "a", 1, 5)],
    "cycle": [("a", "b", 0, 10), ("b", "a", 1, 5), ("c", "b", 2, 1)],
    "all_zero_duration": [("a", "", 0, 0), ("b", "a", 0, 0), ("c", "a", 0, 0)],
    "child_outlasts_parent": [("a", "", 0, 10), ("b", "a", 5, 1_000), ("c", "b", 900, 500)],
    "parallel_children": [("a", "", 0, 10), ("b", "a", 0, 10), ("c", "a", 0, 10)],
    "duplicate_ids": [("a", "", 0, 100), ("a", "", 10, 50), ("b", "a", 20, 5)],
    "single": [("only", "", 0, 42)],
    "one_ns_offsets": [("a", "", 0, 3), ("b", "a", 1, 1), ("c", "a", 2, 1)],
}


def check_view(view: TraceView) -> None:
    """Invariants every view keeps: rows are a depth-first order of the drawn tree (each span's subtree is the
    run of rows after it), the root first; gaps add up to self time; the stage lane's totals are the critical
    paths' lengths; a full window lists every span; the flame graph is a tree."""
    n = view.size
    assert sorted(view.order.tolist()) == list(range(n))
    assert (view.row[view.order] == np.arange(n)).all()
    assert view.order[0] == view.primary_root
    child = np.flatnonzero(view.parent >= 0)
    parent = view.parent[child]
    assert (view.row[parent] < view.row[child]).all()
    assert (view.end_row[child] <= view.end_row[parent]).all()
    subtree = view.end_row - view.row
    assert (np.bincount(parent, weights=subtree[child], minlength=n) + 1 == subtree).all()
    spans = np.arange(n)
    which, start, end = view.gaps(spans)
    untraced = np.bincount(which, weights=end - start, minlength=n)
    has_children = np.diff(view.analysis_children[0]) > 0
    assert (untraced[has_children] == view.self_ns[has_children]).all()
    # The lane tiles the (widened) critical paths: each root's covers its whole subtree's time.
    sections = view.sections
    on_path = int((sections.end_ns - sections.start_ns).sum())
    assert int(view.lane.totals_ns.sum()) + view.lane.untraced_ns == on_path
    roots = np.flatnonzero(view.analysis.tree.parent < 0)
    assert on_path == sum(_subtree_end(view, root) - _subtree_start(view, root) for root in roots)
    rows = window(view, Expansion(aggregate=False), 0, 1_000)
    assert rows["total"] == n
    if n <= 1_000:
        assert sorted(rows["rows"]["span"]) == list(range(n))  # type: ignore[index]
    flame = trace_flame(view)
    ids = set(flame["id"])
    assert flame["parent"].to_list().count("") == 1
    assert all(parent in ids for parent in flame["parent"] if parent)


def _subtree_start(view: TraceView, root: int) -> int:
    tree = view.analysis.tree
    return int(view.span_start_ns[tree.root == root].min())


def _subtree_end(view: TraceView, root: int) -> int:
    tree = view.analysis.tree
    return int(view.span_end_ns[tree.root == root].max())


@pytest.mark.parametrize("case", sorted(EDGE_CASES))
def test_edge_cases(case: str) -> None:
    check_view(build_trace_view("ab" * 16, spans_frame(EDGE_CASES[case]), RULES))


def test_rows_are_depth_first_with_siblings_by_start_and_orphans_after_the_root() -> None:
    view = build_trace_view("ab" * 16, spans_frame(EDGE_CASES["orphans"]), RULES)
    ids = view.spans["span_id"]
    assert [ids[int(span)] for span in view.order] == ["root", "o1", "k", "o2"]
    assert [view.root_reason_name(int(span)) for span in view.order] == ["root", "orphan", "", "orphan"]
    view = build_trace_view("ab" * 16, spans_frame(EDGE_CASES["nested"]), RULES)
    assert [view.spans["span_id"][int(span)] for span in view.order] == ["a", "b", "c", "d"]
    assert view.depth[view.order].tolist() == [0, 1, 2, 1]


def test_a_fifteen_thousand_deep_chain_needs_no_recursion() -> None:
    depth = 15_000
    rows = [(f"{i:016x}", f"{i - 1:016x}" if i else "", i * 10, (depth - i) * 10) for i in range(depth)]
    view = build_trace_view("ab" * 16, spans_frame(rows, service="deep"), RULES)
    check_view(view)
    assert view.order.tolist() == list(range(depth))
    assert int(view.depth.max()) == depth - 1


def test_gaps_are_the_stretches_no_child_covers() -> None:
    view = build_trace_view("ab" * 16, spans_frame(EDGE_CASES["nested"]), RULES)
    which, start, end = view.gaps(np.array([0, 1]))
    assert list(zip(which.tolist(), (start - T0_NS).tolist(), (end - T0_NS).tolist(), strict=True)) == [
        (0, 0, 10),
        (0, 60, 70),
        (0, 90, 100),
        (1, 10, 20),
        (1, 30, 60),
    ]


def test_adjusted_spans_are_drawn_under_their_reported_parent_and_marked() -> None:
    # The tool server's clock runs 5 s ahead: the analysis moves its spans into their client span.
    spans = spans_frame(
        [("r", "", 0, 100 * MS), ("cli", "r", 20 * MS, 40 * MS), ("srv", "cli", 5_020 * MS, 30 * MS)]
    ).with_columns(
        pl.Series("kind", ["Server", "Client", "Server"]),
        pl.Series("service_name", ["agent", "agent", "tool-server"]),
    )
    view = build_trace_view("ab" * 16, spans, RULES)
    srv = view.span_index("srv")
    assert srv is not None and view.adjustment_name(srv) == "shifted"
    assert view.spans["span_id"][int(view.parent[srv])] == "cli"
    # Shown where the analysis puts it: inside its client span, not 5 s after the request.
    assert view.span_start_ns[srv] - T0_NS == 25 * MS
    assert view.duration_ns == 100 * MS
    flags = window(view, Expansion(), 0, 10)["rows"]["flags"]  # type: ignore[index]
    assert [bool(flag & 32) for flag in flags] == [False, False, True]


def test_the_stage_lane_covers_every_root_and_names_the_dominant_stage() -> None:
    # Two roots, one after the other: one request whose window is their envelope (analysis.request_window), the
    # second root analysed under the first, so the lane covers both and the stretch between them is the first's.
    spans = spans_frame([("a", "", 0, 10 * MS), ("b", "a", 2 * MS, 6 * MS), ("z", "", 50 * MS, 40 * MS)])
    view = build_trace_view("ab" * 16, spans, RULES)
    lane = view.lane
    assert not lane.overlapping
    assert int(lane.totals_ns.sum()) == 90 * MS == view.root_duration_ns
    assert (lane.start_ns[0] - T0_NS, lane.end_ns[-1] - T0_NS) == (0, 90 * MS)
    assert lane.dominant == "other"
    assert int((lane.end_ns - lane.start_ns).sum()) == 90 * MS


def test_search_matches_names_services_attributes_and_span_id_prefixes() -> None:
    view = build_trace_view("ab" * 16, spans_frame(EDGE_CASES["nested"]), RULES)
    ids = view.spans["span_id"]

    def found(text: str) -> list[str]:
        return [ids[int(span)] for span in view.search(text)]

    assert found("OP-C") == ["c"]
    assert found("svc-b") == ["b", "d"]
    assert found("index=3") == ["d"]
    assert found("index") == ["a", "b", "c", "d"]
    assert found("  ") == [] and found("nothing like it") == []


def test_every_trace_of_the_shared_real_captures(store: ClickHouse, reader: ClickHouseTraceReader) -> None:
    """Real captures bring the awkward cases: a child longer than its parent (jaeger-ui stats fixture), Zipkin
    spans whose parents were never reported, the same trace in two files (duplicate IDs), the OTel demo."""
    paths = sorted((TRACES / "jaeger").glob("*.json")) + sorted((TRACES / "zipkin").glob("*.json"))
    paths += sorted((TRACES / "otlp").glob("*.json*"))
    summary = import_paths(paths, StoreSink(ClickHouseTraceWriter(store)), progress=False)
    assert summary.spans > 700
    summaries = reader.search(TraceQuery(limit=10_000), tenant=ALL_TENANTS)
    assert summaries.height > 150
    every = reader.traces(summaries["trace_id"].to_list(), tenant=ALL_TENANTS)  # one read, not one per trace
    for spans in every.partition_by("trace_id"):
        view = build_trace_view(spans["trace_id"][0], spans, RULES)
        check_view(view)
        # The lane of a one-root trace no span outlives is its request's critical-path decomposition.
        if int((view.parent < 0).sum()) == 1 and view.sections is view.analysis.sections:
            expected = stage_breakdown(view.analysis).select(pl.col("stage").cast(pl.String), "duration_ns")
            assert {STAGES[i]: int(ns) for i, ns in enumerate(view.lane.totals_ns) if ns} == dict(expected.iter_rows())


def test_a_ten_thousand_span_agent_trace(store: ClickHouse, reader: ClickHouseTraceReader) -> None:
    ClickHouseTraceWriter(store).write(agent_trace(10_000))
    view = build_trace_view(BIG_TRACE, reader.trace(BIG_TRACE, tenant=ALL_TENANTS), RULES)
    check_view(view)
    assert view.size == 9_982
    groups = view.groups
    steps = groups.group[view.span_index("0000000100000001")]
    assert groups.size[steps] == 499
    assert groups.leader[steps] == view.span_index("0000000100000001")
    engine = view.span_index("0000000100000003")
    assert engine is not None
    assert [stage for stage, _, _ in view.pieces_of(engine)] == [
        "llm.tokenize",
        "llm.queue",
        "llm.prefill",
        "llm.decode",
        "llm.detokenize",
    ]
    assert view.lane.dominant == "llm.decode"
    assert view.summary["llm_calls"] == 499
    calls = view.model_calls.filter(pl.col("index") == engine)
    assert calls["model"].to_list() == ["llama-3-8b"] and calls["input_tokens"][0] > 0
    minimap = view.minimap
    assert minimap.rows.sum() == view.size and (minimap.end_ns >= minimap.start_ns).all()
