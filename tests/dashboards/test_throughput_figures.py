"""The Throughput page's pure builders: the scatter (a trace per configuration, labelled; the frontier line through
the frontier points in throughput order) and the table (frontier first, links to example traces)."""

from __future__ import annotations

import polars as pl
from dash import html
from dash_support import texts, walk

from dashboards.throughput_figures import throughput_latency_figure, throughput_table

POINTS = pl.DataFrame(
    {
        "label": ["m max_num_seqs=8", "m max_num_seqs=32", "m max_num_seqs=128", "m max_num_seqs=8"],
        "model": ["m"] * 4,
        "max_num_seqs": ["8", "32", "128", "8"],
        "max_num_batched_tokens": ["4096"] * 4,
        "enable_chunked_prefill": ["true"] * 4,
        "enable_prefix_caching": ["true"] * 4,
        "tensor_parallel_size": [""] * 4,
        "bucket_start_ns": [0, 0, 0, 60_000_000_000],
        "requests": [10, 20, 40, 5],
        "requests_per_s": [1.0, 2.0, 3.3, 0.9],
        "output_tokens_per_s": [100.0, 200.0, 165.0, 90.0],
        "e2e_p50_ms": [1000.0, 500.0, 2000.0, 1100.0],
        "e2e_p95_ms": [1200.0, 600.0, 2300.0, 1300.0],
        "ttft_p50_ms": [200.0, 50.0, 500.0, None],
        "ttft_p95_ms": [210.0, 55.0, 520.0, None],
        "on_frontier": [False, True, True, False],
        "example_trace_ids": [["a" * 32], ["b" * 32, "c" * 32], ["d" * 32], []],
    }
)


def test_scatter_labels_each_configuration_and_draws_the_frontier_in_throughput_order() -> None:
    figure = throughput_latency_figure(POINTS, "requests_per_s", "e2e_p95_ms")
    by_name = {trace.name: trace for trace in figure.data}
    assert list(by_name) == ["m max_num_seqs=8", "m max_num_seqs=32", "m max_num_seqs=128", "Pareto frontier"]
    # Markers say what differs between the points; the legend names the whole configuration.
    assert list(by_name["m max_num_seqs=8"].x) == [1.0, 0.9] and set(by_name["m max_num_seqs=8"].text) == {
        "max_num_seqs=8"
    }
    assert list(by_name["Pareto frontier"].x) == [2.0, 3.3] and list(by_name["Pareto frontier"].y) == [600.0, 2300.0]
    assert figure.layout.xaxis.title.text == "Throughput (requests/s)"


def test_points_without_the_latency_are_not_drawn_and_nothing_says_why() -> None:
    figure = throughput_latency_figure(POINTS, "requests_per_s", "ttft_p95_ms")
    assert sum(len(trace.x) for trace in figure.data if trace.name != "Pareto frontier") == 3
    empty = throughput_latency_figure(POINTS.clear(), "requests_per_s", "e2e_p95_ms")
    assert "No vLLM llm_request spans" in empty.layout.annotations[0].text


def test_table_lists_the_frontier_first_with_links_to_examples() -> None:
    seen: list[tuple[list[str], str]] = []

    def drill(trace_ids: list[str], model: str) -> html.Span:
        seen.append((trace_ids, model))
        return html.Span(" ".join(trace_ids))

    table = throughput_table(POINTS, drill)
    rows = [c for c in walk(table) if isinstance(c, html.Tr) and "hs-throughput-row" in getattr(c, "className", "")]
    assert [r.className for r in rows[:2]] == ["hs-throughput-row hs-frontier"] * 2
    assert texts(rows[0])[0] == "m max_num_seqs=128"
    assert seen[0] == (["d" * 32], "m") and len(seen) == 4
    assert "—" in texts(rows[-1])
