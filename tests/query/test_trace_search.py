"""Trace search with a whole-trace duration filter and a server-side sort (``query.trace_search``) over the
OpenTelemetry demo capture in a real embedded store."""

from __future__ import annotations

import polars as pl
import pytest

from collector.ingest import Ingestor
from query import trace_search
from query.trace_search import TraceSearch, search_traces
from storage.reader import ClickHouseTraceReader, TraceQuery
from storage.tenancy import ALL_TENANTS
from testkit import TRACES, ingest_otlp_json_file

DEMO = TRACES / "otlp" / "oteltui__test_data.traces_only.jsonl"


@pytest.fixture
def everything(ingestor: Ingestor, reader: ClickHouseTraceReader) -> pl.DataFrame:
    ingest_otlp_json_file(ingestor, DEMO)
    return reader.search(TraceQuery(limit=1_000), tenant=ALL_TENANTS)


@pytest.mark.both_layouts
def test_sorts_look_at_every_match_not_only_the_page(reader: ClickHouseTraceReader, everything: pl.DataFrame) -> None:
    longest = search_traces(reader, None, TraceSearch(TraceQuery(), sort="longest", limit=5), tenant=ALL_TENANTS)
    expected = everything.sort("duration_ns", descending=True)["duration_ns"].head(5).to_list()
    assert longest.traces["duration_ns"].to_list() == expected
    assert longest.candidates == everything.height == 141 and not longest.capped
    most = search_traces(reader, None, TraceSearch(TraceQuery(), sort="most_spans", limit=1), tenant=ALL_TENANTS)
    assert most.traces["span_count"].to_list() == [int(everything["span_count"].max())]  # type: ignore[arg-type]
    # Without a store-side model use (no analysis service), usage columns are there and empty.
    assert most.traces["llm_calls"].to_list() == [None] and most.traces["tokens"].to_list() == [0]


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


def test_capped_candidates_are_said(
    reader: ClickHouseTraceReader, everything: pl.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace_search, "CANDIDATES", 10)
    capped = search_traces(reader, None, TraceSearch(TraceQuery(), sort="longest", limit=3), tenant=ALL_TENANTS)
    assert capped.capped and capped.candidates == 10 and capped.traces.height == 3
    assert everything.height > 10
