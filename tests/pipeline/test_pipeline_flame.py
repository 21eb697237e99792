"""Flame-graph nodes (paths of service:operation) and their totals, on hand-built span frames."""

from __future__ import annotations

import time

import polars as pl
from pipeline_support import MS, Span, span_frame

from analysis import analyze
from processors.pipeline.flame import ROOT_ID, flame_graph, span_nodes, trace_nodes


def _by_label(graph: pl.DataFrame) -> dict[str, tuple[int, int, int]]:
    """``{label: (self ms, total ms, count)}`` (labels are unique in these graphs)."""
    return {
        row["label"]: (row["self_ns"] // MS, row["total_ns"] // MS, row["count"]) for row in graph.iter_rows(named=True)
    }


def test_same_paths_merge_within_and_across_traces_and_totals_add_up() -> None:
    # Trace a: api:GET [0, 100] with two db:query children [10, 30] and [20, 50] (overlapping: they cover
    # [10, 50], 40 ms) and a cache:get [60, 70], so the root's self time is 100 - 40 - 10 = 50. Trace b: the
    # same root with one db:query [0, 20], self time 80.
    a = [
        Span("0000000000000001", "", "api", "GET", 0, 100),
        Span("0000000000000002", "0000000000000001", "db", "query", 10, 30),
        Span("0000000000000003", "0000000000000001", "db", "query", 20, 50),
        Span("0000000000000004", "0000000000000001", "cache", "get", 60, 70),
    ]
    b = [
        Span("0000000000000001", "", "api", "GET", 0, 100),
        Span("0000000000000002", "0000000000000001", "db", "query", 0, 20),
    ]
    analysis = analyze(span_frame({"a" * 32: a, "b" * 32: b}))

    nodes, parents = span_nodes(analysis)
    # Spans are ordered by trace, then start: a's root, its db spans, its cache span, then b's root and db span.
    assert nodes[0] == nodes[4] and nodes[1] == nodes[2] == nodes[5] and len(set(nodes.tolist())) == 3
    assert parents[0] == 0 and parents[1] == nodes[0] and parents[3] == nodes[0]

    graph = flame_graph(trace_nodes(analysis), "two traces", 2)
    # api:GET self = 50 + 80; db:query self = 20 + 30 + 20; cache:get 10. Totals add the children's.
    assert _by_label(graph) == {
        "two traces": (0, 210, 2),
        "api:GET": (130, 210, 2),
        "db:query": (70, 70, 3),
        "cache:get": (10, 10, 1),
    }
    root = graph.row(0, named=True)
    assert (root["id"], root["parent"], root["depth"]) == (ROOT_ID, "", 0)
    by_label = {row["label"]: row for row in graph.iter_rows(named=True)}
    assert by_label["api:GET"]["parent"] == ROOT_ID and by_label["db:query"]["parent"] == by_label["api:GET"]["id"]
    assert all(len(row["id"]) == 16 for row in graph.iter_rows(named=True) if row["id"] != ROOT_ID)


def test_a_node_depends_on_its_whole_path_not_just_its_label() -> None:
    # db:query under api:GET and db:query under api:POST are different nodes.
    spans = [
        Span("0000000000000001", "", "api", "GET", 0, 10),
        Span("0000000000000002", "0000000000000001", "db", "query", 0, 5),
        Span("0000000000000003", "", "api", "POST", 20, 30),
        Span("0000000000000004", "0000000000000003", "db", "query", 20, 25),
    ]
    nodes, _ = span_nodes(analyze(span_frame({"c" * 32: spans})))
    assert len(set(nodes.tolist())) == 4


def test_a_15000_deep_chain_needs_no_recursion() -> None:
    depth = 15_000
    chain = [Span(f"{i + 1:016x}", f"{i:016x}" if i else "", "svc", "step", i, 2 * depth - i) for i in range(depth)]
    started = time.perf_counter()
    graph = flame_graph(trace_nodes(analyze(span_frame({"d" * 32: chain}))), "deep", 1)
    assert time.perf_counter() - started < 10
    assert graph.height == depth + 1
    # Every step has 2 ms of self time (1 ms each side of its child), the innermost its whole 2 ms.
    assert graph["total_ns"][0] == 2 * depth * MS
    assert graph["depth"].max() == depth
