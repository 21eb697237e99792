"""Figure builders on hand-built edge cases and on the OpenTelemetry demo capture, without a browser."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import plotly.graph_objects as go
import polars as pl
import pytest
from dash_support import T0_NS, spans_frame

from collector.ingest import Ingestor
from dashboards.figures import (
    BAR_THICKNESS,
    MIN_BAR_FRACTION,
    empty_figure,
    flame_graph_figure,
    search_scatter_figure,
    waterfall_figure,
)
from dashboards.span_tree import span_tree
from hotspan.importer import StoreSink, import_paths
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader, TraceQuery
from storage.tenancy import ALL_TENANTS
from storage.writer import ClickHouseTraceWriter
from testkit import TRACES, ingest_otlp_json_file

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"

EDGE_CASES: dict[str, list[tuple[str, str, int, int]]] = {
    "nested": [("a", "", 0, 100), ("b", "a", 10, 50), ("c", "b", 20, 10), ("d", "a", 70, 20)],
    "orphans": [("root", "", 0, 100), ("o1", "gone", 5, 10), ("o2", "gone", 6, 0), ("k", "o1", 7, 1)],
    "self_parent": [("a", "a", 0, 10), ("b", "a", 1, 5)],
    "cycle": [("a", "b", 0, 10), ("b", "a", 1, 5), ("c", "b", 2, 1)],
    "all_zero_duration": [("a", "", 0, 0), ("b", "a", 0, 0), ("c", "a", 0, 0)],
    "some_zero_duration": [("a", "", 0, 1_000_000), ("b", "a", 500_000, 0)],
    "child_outlasts_parent": [("a", "", 0, 10), ("b", "a", 5, 1_000), ("c", "b", 900, 500)],
    "parallel_children_sum_above_parent": [("a", "", 0, 10), ("b", "a", 0, 10), ("c", "a", 0, 10)],
    "duplicate_ids": [("a", "", 0, 100), ("a", "", 10, 50), ("b", "a", 20, 5)],
    "single": [("only", "", 0, 42)],
    "one_ns_offsets": [("a", "", 0, 3), ("b", "a", 1, 1), ("c", "a", 2, 1)],
    "duration_beyond_int64": [("a", "", 0, 100), ("b", "a", 10, 2**64 - 1)],
}


def _bars(figure: go.Figure) -> list[go.Bar]:
    return [trace for trace in figure.data if trace.type == "bar"]


def assert_waterfall(figure: go.Figure, spans: pl.DataFrame) -> None:
    """One finite, positive-width bar per span; every depth-first position used once; labels match."""
    bars = _bars(figure)
    ys = [y for bar in bars for y in bar.y]
    assert len(ys) == spans.height
    assert sorted(ys) == list(range(spans.height))
    for bar in bars:
        assert bar.width == BAR_THICKNESS  # or Plotly sizes bars by the gaps between a service's rows
        assert all(math.isfinite(v) and v >= 0 for v in bar.base)
        assert all(math.isfinite(v) and v > 0 for v in bar.x)
        assert len(bar.customdata) == len(bar.y)
    rows = sorted(int(data[0]) for bar in bars for data in bar.customdata)
    assert rows == list(range(spans.height))
    (labels,) = [trace for trace in figure.data if trace.type == "scatter"]
    assert len(labels.text) == spans.height
    assert all(math.isfinite(v) for v in labels.x)
    assert figure.layout.height > 0


def assert_icicle(figure: go.Figure, spans: pl.DataFrame) -> None:
    """Unique IDs, one root, valid parents, finite positive values, each parent >= its children's sum
    (``branchvalues="total"`` draws nothing otherwise) and a tile for every span."""
    (icicle,) = figure.data
    assert icicle.type == "icicle"
    assert icicle.branchvalues == "total"
    ids, parents, values = list(icicle.ids), list(icicle.parents), list(icicle.values)
    assert len(set(ids)) == len(ids)
    assert parents.count("") == 1
    known = set(ids)
    assert all(parent == "" or parent in known for parent in parents)
    assert all(math.isfinite(v) and v > 0 for v in values)
    children_sum: dict[str, float] = defaultdict(float)
    for parent, value in zip(parents, values, strict=True):
        if parent:
            children_sum[parent] += value
    value_of = dict(zip(ids, values, strict=True))
    assert all(value_of[node] >= total for node, total in children_sum.items())
    span_rows = sorted(int(data[0]) for data in icicle.customdata if int(data[0]) >= 0)
    assert span_rows == list(range(spans.height))


@pytest.mark.parametrize("case", sorted(EDGE_CASES))
def test_figures_on_edge_cases(case: str) -> None:
    spans = spans_frame(EDGE_CASES[case])
    tree = span_tree(spans)
    assert_waterfall(waterfall_figure(spans, tree), spans)
    assert_icicle(flame_graph_figure(spans, tree), spans)


def test_waterfall_rows_follow_depth_first_order_with_indentation() -> None:
    spans = spans_frame(EDGE_CASES["nested"])
    figure = waterfall_figure(spans)
    position = {int(data[0]): y for bar in _bars(figure) for data, y in zip(bar.customdata, bar.y, strict=True)}
    assert [row for row, _ in sorted(position.items(), key=lambda item: item[1])] == [0, 1, 2, 3]
    (labels,) = [trace for trace in figure.data if trace.type == "scatter"]
    depths = [0, 1, 2, 1]
    assert [x / labels.x[1] for x in labels.x] == depths
    assert "op-c" in labels.text[2]


def test_waterfall_times_are_ms_since_trace_start_without_float_loss() -> None:
    spans = spans_frame(EDGE_CASES["one_ns_offsets"])
    by_row = {
        int(data[0]): (base, width)
        for bar in _bars(waterfall_figure(spans))
        for data, base, width in zip(bar.customdata, bar.base, bar.x, strict=True)
    }
    assert by_row[1][0] == pytest.approx(1e-6)
    assert by_row[2][0] == pytest.approx(2e-6)
    assert spans["start_time_unix_nano"][0] == T0_NS


def test_zero_duration_spans_get_a_visible_minimum_width() -> None:
    spans = spans_frame(EDGE_CASES["some_zero_duration"])
    widths = {
        int(d[0]): w for bar in _bars(waterfall_figure(spans)) for d, w in zip(bar.customdata, bar.x, strict=True)
    }
    assert widths[1] == pytest.approx(1.0 * MIN_BAR_FRACTION)  # trace lasts 1 ms
    assert widths[0] == pytest.approx(1.0)


def test_waterfall_colors_by_service_and_outlines_errors() -> None:
    spans = spans_frame(EDGE_CASES["nested"]).with_columns(
        pl.when(pl.col("span_id") == "c").then(pl.lit("Error")).otherwise(pl.col("status_code")).alias("status_code")
    )
    bars = _bars(waterfall_figure(spans))
    assert {bar.name for bar in bars} == {"svc-a", "svc-b"}
    assert len({bar.marker.color for bar in bars}) == 2
    outlined = [w for bar in bars for w in bar.marker.line.width if w > 0]
    assert outlined == [2]


def test_broken_links_are_marked_in_labels_and_hover() -> None:
    spans = spans_frame(EDGE_CASES["orphans"])
    figure = waterfall_figure(spans)
    (labels,) = [trace for trace in figure.data if trace.type == "scatter"]
    assert sum("⚠" in text for text in labels.text) == 2
    assert any("missing parent" in text for bar in _bars(figure) for text in bar.hovertext)
    icicle = flame_graph_figure(spans).data[0]
    assert icicle.ids[0] == "trace" and icicle.parents[0] == ""


def test_child_longer_than_parent_widens_the_parent_tile() -> None:
    spans = spans_frame(EDGE_CASES["child_outlasts_parent"])
    icicle = flame_graph_figure(spans).data[0]
    value_of = dict(zip(icicle.ids, icicle.values, strict=True))
    assert value_of["s0"] == value_of["s1"] == 1_000  # the root (10 ns) is widened to its child's 1,000 ns
    assert value_of["s2"] == 500


def test_fifteen_thousand_deep_chain() -> None:
    depth = 15_000
    rows = [(f"{i:016x}", f"{i - 1:016x}" if i else "", i * 10, (depth - i) * 10) for i in range(depth)]
    spans = spans_frame(rows, service="deep")
    tree = span_tree(spans)
    waterfall = waterfall_figure(spans, tree)
    assert_waterfall(waterfall, spans)
    assert waterfall.layout.height <= 16_000
    flame = flame_graph_figure(spans, tree)
    assert_icicle(flame, spans)
    assert flame.data[0].maxdepth > 0


def test_hover_text_escapes_user_html() -> None:
    spans = spans_frame([("a", "", 0, 10)]).with_columns(pl.lit("<script>x</script>").alias("name"))
    figure = waterfall_figure(spans)
    assert "<script>" not in _bars(figure)[0].hovertext[0]
    assert "&lt;script&gt;" in _bars(figure)[0].hovertext[0]


def test_empty_frames_give_a_message_not_a_blank_figure() -> None:
    spans = spans_frame([])
    for figure in (waterfall_figure(spans), flame_graph_figure(spans), empty_figure("nothing")):
        assert figure.layout.annotations and figure.layout.annotations[0].text


def test_search_scatter() -> None:
    summaries = pl.DataFrame(
        {
            "trace_id": ["a" * 32, "b" * 32],
            "root_service": ["gw", "gw"],
            "root_name": ["GET /", "POST /chat"],
            "start_time_unix_nano": [T0_NS, T0_NS + 1_000_000_000],
            "duration_ns": [5_000_000, 12_000_000],
            "span_count": [3, 30],
            "service_count": [1, 3],
            "error_count": [0, 2],
        }
    )
    (dots,) = search_scatter_figure(summaries).data
    assert list(dots.y) == [5.0, 12.0]
    assert [d[0] for d in dots.customdata] == ["a" * 32, "b" * 32]
    assert dots.marker.size[1] > dots.marker.size[0]
    assert search_scatter_figure(summaries.clear()).layout.annotations


def test_figures_for_every_trace_of_the_otel_demo(ingestor: Ingestor, reader: ClickHouseTraceReader) -> None:
    results = ingest_otlp_json_file(ingestor, DEMO)
    assert sum(result.accepted for result in results) == 547
    summaries = reader.search(TraceQuery(limit=1_000), tenant=ALL_TENANTS)
    assert summaries.height == 141
    largest = summaries.sort(["span_count", "service_count"], descending=True).row(0, named=True)
    for trace_id in summaries["trace_id"]:
        spans = reader.trace(trace_id, tenant=ALL_TENANTS)
        tree = span_tree(spans)
        waterfall = waterfall_figure(spans, tree)
        assert_waterfall(waterfall, spans)
        assert_icicle(flame_graph_figure(spans, tree), spans)
        if trace_id == largest["trace_id"]:
            assert spans.height == largest["span_count"] == 18
            assert Counter(bar.name for bar in _bars(waterfall)).total() == largest["service_count"] == 4


def test_figures_for_every_trace_of_the_shared_jaeger_zipkin_and_small_otlp_files(
    store: ClickHouse, reader: ClickHouseTraceReader
) -> None:
    """Real captures bring the awkward cases: a child longer than its parent (jaeger-ui stats fixture),
    Zipkin spans whose parents were never reported, and the same trace in two files (duplicate IDs)."""
    paths = sorted((TRACES / "jaeger").glob("*.json")) + sorted((TRACES / "zipkin").glob("*.json"))
    paths += [path for path in sorted((TRACES / "otlp").glob("*.json*")) if path != DEMO]
    summary = import_paths(paths, StoreSink(ClickHouseTraceWriter(store)), progress=False)
    assert summary.spans > 250
    summaries = reader.search(TraceQuery(limit=10_000), tenant=ALL_TENANTS)
    assert summaries.height > 20
    for trace_id in summaries["trace_id"]:
        spans = reader.trace(trace_id, tenant=ALL_TENANTS)
        tree = span_tree(spans)
        assert_waterfall(waterfall_figure(spans, tree), spans)
        assert_icicle(flame_graph_figure(spans, tree), spans)
