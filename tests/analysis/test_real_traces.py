"""The analysis on real public traces, stored in and read back from chDB as the service would.

oteltui's test data (141 traces of the OpenTelemetry demo: frontend-proxy, frontend, checkout, flagd, ...;
one trace has an orphan) is imported through the decoder; every trace is read back with
``ClickHouseTraceReader.trace``.
"""

from __future__ import annotations

import polars as pl
import pytest
from cluster_kit import layout_database

from analysis.critical_path import critical_path
from analysis.decomposition import STAGE_COLUMNS, compare_attributions, stage_breakdown_wide, wall_clock_breakdown
from analysis.statistics import trace_statistics
from analysis.trace_analysis import analyze
from analysis.tree import build_tree
from collector.ingest import Ingestor
from storage.reader import ClickHouseTraceReader, TraceQuery
from storage.tenancy import ALL_TENANTS
from storage.writer import ClickHouseTraceWriter
from testkit import TRACES, ingest_otlp_json_file

OTELTUI = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"
ONE_US = 1_000


@pytest.fixture(scope="module")
def oteltui_spans(chdb_dsn: str, layout: str) -> pl.DataFrame:
    """Every span of the capture as stored and read back, once per module."""
    with layout_database(chdb_dsn, layout) as store:
        results = ingest_otlp_json_file(Ingestor(ClickHouseTraceWriter(store)), OTELTUI)
        assert sum(r.rejected for r in results) == 0
        reader = ClickHouseTraceReader(store)
        trace_ids = reader.search(TraceQuery(limit=10_000), tenant=ALL_TENANTS)["trace_id"].to_list()
        return reader.traces(trace_ids, tenant=ALL_TENANTS).drop("tenant")  # by trace ID, then start


def test_every_request_decomposes_to_its_root_duration(oteltui_spans: pl.DataFrame) -> None:
    analysis = analyze(oteltui_spans)
    assert analysis.tree.trace_count > 100
    wide = stage_breakdown_wide(analysis)
    assert wide.height == analysis.tree.trace_count
    stage_sum = wide.select(pl.sum_horizontal(STAGE_COLUMNS)).to_series()
    assert ((stage_sum - wide["duration_ns"]).abs() <= ONE_US).all()

    wall = wall_clock_breakdown(analysis).group_by("trace_id").agg(pl.col("duration_ns").sum())
    joined = wide.select("trace_id", "duration_ns").join(wall, on="trace_id", suffix="_wall")
    assert joined.height == wide.height
    assert ((joined["duration_ns_wall"] - joined["duration_ns"]).abs() <= ONE_US).all()


def test_critical_path_statistics_and_batching(oteltui_spans: pl.DataFrame) -> None:
    # Every root of every trace (orphans included) is tiled by its critical path.
    tree = build_tree(oteltui_spans)
    per_root = critical_path(tree).group_by("trace_id", "root_span_id").agg(pl.col("duration_ns").sum())
    roots = (
        tree.frame().filter(pl.col("parent_span_id") == "").select("trace_id", pl.col("span_id").alias("root_span_id"))
    )
    durations = pl.DataFrame(
        {
            "trace_id": tree.spans["trace_id"],
            "root_span_id": tree.spans["span_id"],
            "root_ns": tree.end_ns - tree.start_ns,
        }
    )
    checked = (
        roots.join(durations, on=["trace_id", "root_span_id"])
        .join(per_root, on=["trace_id", "root_span_id"], how="left")
        .with_columns(pl.col("duration_ns").fill_null(0))
    )
    assert checked.height == tree.size - int((tree.parent >= 0).sum())
    assert (checked["duration_ns"] == checked["root_ns"]).all()

    # Analysing all traces at once gives each trace what analysing it alone gives.
    together = stage_breakdown_wide(oteltui_spans)
    some = together["trace_id"].head(5).to_list()
    alone = pl.concat([stage_breakdown_wide(oteltui_spans.filter(pl.col("trace_id") == t)) for t in some])
    assert together.filter(pl.col("trace_id").is_in(some)).equals(alone)

    analysis = analyze(tree)
    table = trace_statistics(analysis)
    assert table["count"].sum() == analysis.tree.size
    assert (table["self_total_ms"] <= table["total_ms"] + 1e-9).all()
    compared = compare_attributions(analysis)
    assert set(compared["trace_id"]) == set(oteltui_spans["trace_id"])
