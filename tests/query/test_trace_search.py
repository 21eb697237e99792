"""Trace search with a whole-trace duration filter and a server-side sort (``query.trace_search``) over the
OpenTelemetry demo capture in a real embedded store."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl
import pytest
from cluster_kit import layout_database

from collector.ingest import Ingestor
from hotspan.app import Storage, open_trace_pipeline, trace_processors
from processors.pipeline.config import TracePipelineConfig
from query.trace_search import Sort, TraceSearch, search_traces
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader, TraceQuery
from storage.tenancy import ALL_TENANTS
from storage.writer import ClickHouseTraceWriter
from synthetic_traces import agent_trace
from testkit import TRACES, ingest_otlp_json_file, query_room

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"


@pytest.fixture(scope="module")
def demo(chdb_dsn: str, layout: str) -> Iterator[tuple[ClickHouseTraceReader, pl.DataFrame]]:
    """The demo capture stored once per module and layout (the tests only read it): its reader and every trace."""
    with layout_database(chdb_dsn, layout) as ch:
        ingest_otlp_json_file(Ingestor(ClickHouseTraceWriter(ch)), DEMO)
        reader = ClickHouseTraceReader(ch)
        yield reader, reader.search(TraceQuery(limit=1_000), tenant=ALL_TENANTS)


@pytest.fixture
def reader(demo: tuple[ClickHouseTraceReader, pl.DataFrame]) -> ClickHouseTraceReader:
    return demo[0]


@pytest.fixture
def everything(demo: tuple[ClickHouseTraceReader, pl.DataFrame]) -> pl.DataFrame:
    return demo[1]


@pytest.mark.both_layouts
def test_sorts_look_at_every_match_not_only_the_page(reader: ClickHouseTraceReader, everything: pl.DataFrame) -> None:
    longest = search_traces(reader, None, TraceSearch(TraceQuery(), sort="longest", limit=5), tenant=ALL_TENANTS)
    expected = everything.sort("duration_ns", descending=True)["duration_ns"].head(5).to_list()
    assert longest.traces["duration_ns"].to_list() == expected
    assert longest.ranked and everything.height == 141
    most = search_traces(reader, None, TraceSearch(TraceQuery(), sort="most_spans", limit=1), tenant=ALL_TENANTS)
    assert most.traces["span_count"].to_list() == [int(everything["span_count"].max())]  # type: ignore[arg-type]
    # Without a store-side model use (no analysis service), usage columns are there and empty.
    assert most.traces["llm_calls"].to_list() == [None] and most.traces["tokens"].to_list() == [0]
    # Tokens rank from the pipeline's summaries: none here (not analysed), so every trace has 0 and ties by ID.
    tokens = search_traces(reader, None, TraceSearch(TraceQuery(), sort="most_tokens", limit=2), tenant=ALL_TENANTS)
    assert tokens.traces["trace_id"].to_list() == sorted(everything["trace_id"].to_list())[:2]


def test_the_trace_duration_filter_bounds_the_whole_trace(
    reader: ClickHouseTraceReader, everything: pl.DataFrame
) -> None:
    threshold = int(everything["duration_ns"].median())  # type: ignore[arg-type]
    search = TraceSearch(TraceQuery(), min_trace_duration_ns=threshold, limit=1_000)
    found = search_traces(reader, None, search, tenant=ALL_TENANTS).traces
    assert found.height == everything.filter(pl.col("duration_ns") >= threshold).height
    assert found["duration_ns"].min() >= threshold  # type: ignore[operator]
    # Newest first, as the store answers.
    assert found["start_time_unix_nano"].to_list() == sorted(found["start_time_unix_nano"].to_list(), reverse=True)
    with pytest.raises(ValueError, match="above max"):
        search_traces(
            reader, None, TraceSearch(TraceQuery(), min_trace_duration_ns=2, max_trace_duration_ns=1), tenant=None
        )


@pytest.mark.parametrize(
    ("sort", "column", "descending"),
    [
        ("oldest", "start_time_unix_nano", False),
        ("shortest", "duration_ns", False),
        ("most_errors", "error_count", True),
    ],
)
def test_a_sort_ranks_every_match_in_the_store(
    reader: ClickHouseTraceReader, everything: pl.DataFrame, sort: Sort, column: str, descending: bool
) -> None:
    # The newest few would not hold the oldest (or shortest) trace: the store ranks every match before the limit.
    found = search_traces(reader, None, TraceSearch(TraceQuery(), sort=sort, limit=3), tenant=ALL_TENANTS).traces
    expected = everything.sort(column, "trace_id", descending=[descending, False]).head(3)
    assert found[column].to_list() == expected[column].to_list()
    bounded = TraceSearch(
        TraceQuery(), sort=sort, limit=3, max_trace_duration_ns=int(everything["duration_ns"].median())
    )  # type: ignore[arg-type]
    within = search_traces(reader, None, bounded, tenant=ALL_TENANTS).traces
    assert within.height == 3 and within["duration_ns"].max() <= bounded.max_trace_duration_ns  # type: ignore[operator]
    with pytest.raises(ValueError, match="unknown order"):
        reader.ranked_search(TraceQuery(), "loudest", tenant=ALL_TENANTS)  # type: ignore[arg-type]


def test_most_tokens_ranks_by_the_analysed_token_counts(store: ClickHouse) -> None:
    writer, reader = ClickHouseTraceWriter(store), ClickHouseTraceReader(store)
    ids = [f"{seed:032x}" for seed in range(1, 5)]
    for seed, trace_id in enumerate(ids, 1):
        writer.write(agent_trace(60 * seed, trace_id=trace_id, seed=seed))
    storage = Storage(store, reader, writer)
    open_trace_pipeline(storage, TracePipelineConfig(trace_idle_s=0), trace_processors(storage)).run_once(force=True)
    room = query_room(store)
    usage = room.analysis.trace_usage(ids, tenant=ALL_TENANTS)
    tokens = usage.select("trace_id", (pl.col("input_tokens") + pl.col("output_tokens")).alias("tokens"))
    expected = tokens.sort("tokens", "trace_id", descending=[True, False])["trace_id"].head(2).to_list()
    found = search_traces(
        reader, room.analysis, TraceSearch(TraceQuery(), sort="most_tokens", limit=2), tenant=ALL_TENANTS
    )
    assert found.traces["trace_id"].to_list() == expected
    assert found.traces["tokens"].to_list() == tokens.sort("tokens", descending=True)["tokens"].head(2).to_list()


def test_longest_stage_ranks_the_traces_that_spent_time_in_that_stage(store: ClickHouse) -> None:
    """How a Stages page row lists its requests: the traces sorted by that stage's critical-path time, not by their
    whole duration, and only those that spent time in it."""
    writer, reader = ClickHouseTraceWriter(store), ClickHouseTraceReader(store)
    ids = [f"{seed:032x}" for seed in range(1, 6)]
    for seed, trace_id in enumerate(ids, 1):
        writer.write(agent_trace(60 * seed, trace_id=trace_id, seed=seed))
    storage = Storage(store, reader, writer)
    open_trace_pipeline(storage, TracePipelineConfig(trace_idle_s=0), trace_processors(storage)).run_once(force=True)
    room = query_room(store)
    summaries = room.analysis.trace_usage(ids, tenant=ALL_TENANTS, stage="llm.decode")
    spent = summaries.filter(pl.col("stage_ns") > 0).sort("stage_ns", "trace_id", descending=[True, False])
    assert spent.height >= 2
    search = TraceSearch(TraceQuery(), sort="longest_stage", limit=3, stage="llm.decode")
    found = search_traces(reader, room.analysis, search, tenant=ALL_TENANTS).traces
    assert found["trace_id"].to_list() == spent["trace_id"].head(3).to_list()
    assert found["stage_ns"].to_list() == spent["stage_ns"].head(3).to_list()
    with pytest.raises(ValueError, match="sort by stage needs"):
        search_traces(reader, room.analysis, TraceSearch(TraceQuery(), sort="longest_stage"), tenant=ALL_TENANTS)
