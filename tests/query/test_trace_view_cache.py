"""Kept trace views (``query.trace_view_cache``): one read per load, reads shared by concurrent requests, the bound on
spans held, and tenants kept apart."""

from __future__ import annotations

import threading

import polars as pl
import pyarrow as pa
import pytest

from analysis.stage_rules import load_stage_rules
from query.trace_view_cache import TraceViews
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader
from storage.schema import with_tenant
from storage.writer import ClickHouseTraceWriter
from synthetic_traces import agent_trace
from testkit import CountingTraceReader

RULES = load_stage_rules()
A, B = "a1" * 16, "b2" * 16


@pytest.fixture
def counted(store: ClickHouse) -> CountingTraceReader:
    """The store holding traces A and B of tenant acme, its reads of a trace's spans counted."""
    writer = ClickHouseTraceWriter(store)
    writer.write(with_tenant(agent_trace(100, trace_id=A), "acme"))
    writer.write(with_tenant(agent_trace(200, trace_id=B), "acme"))
    return CountingTraceReader(store)


@pytest.fixture
def views(counted: CountingTraceReader) -> TraceViews:
    return TraceViews(counted, RULES, max_spans_held=250)


def test_a_load_reads_once_and_later_requests_read_the_kept_view(
    views: TraceViews, counted: CountingTraceReader, store: ClickHouse
) -> None:
    loaded = views.load(A, tenant="acme")
    assert loaded is not None and counted.span_reads == 1
    assert all(views.get(A, tenant="acme") is loaded for _ in range(5))
    assert counted.span_reads == 1
    assert views.load(A, tenant="acme") is loaded and counted.span_reads == 1  # a page load of an unchanged trace
    late = agent_trace(100, trace_id=A).slice(0, 1)
    late = late.set_column(late.schema.get_field_index("SpanId"), "SpanId", pa.array(["0123456789abcdef"]))
    ClickHouseTraceWriter(store).write(with_tenant(late, "acme"))  # a late span arrives
    again = views.load(A, tenant="acme")  # so the next page load reads the trace as stored now
    assert again is not loaded and counted.span_reads == 2 and again.size == loaded.size + 1


def test_concurrent_requests_for_one_trace_share_one_read(views: TraceViews, counted: CountingTraceReader) -> None:
    found = []
    threads = [threading.Thread(target=lambda: found.append(views.get(B, tenant="acme"))) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(found) == 6 and all(view is found[0] for view in found)
    assert counted.span_reads == 1


def test_the_spans_held_are_bounded(views: TraceViews, counted: CountingTraceReader) -> None:
    first = views.get(A, tenant="acme")
    assert first is not None
    views.get(B, tenant="acme")  # 80 + 180 spans exceed 250: A, the least recently used, goes
    assert counted.span_reads == 2
    assert views.get(A, tenant="acme") is not first and counted.span_reads == 3


def test_tenants_never_see_each_other(views: TraceViews) -> None:
    assert views.get(A, tenant="globex") is None
    assert views.get(A, tenant="acme") is not None
    assert views.get(A, tenant=None) is not None  # an admin reads every tenant


def test_a_trace_over_the_read_bound_is_read_in_part(store: ClickHouse, reader: ClickHouseTraceReader) -> None:
    ClickHouseTraceWriter(store).write(agent_trace(300, trace_id=B))
    stored = reader.trace_size(B, tenant=None)
    view = TraceViews(reader, RULES, max_read_spans=120).load(B, tenant=None)
    assert view is not None and view.truncated
    assert view.size == 120 and view.stored_spans == stored > 120
    first = reader.trace(B, tenant=None)["span_id"].head(120).to_list()
    assert view.spans["span_id"].to_list() == first  # the first spans by start, as the trace pages order them
    # The whole trace, by operation, summed in the store: every stored span counted once, a re-sent copy too.
    ClickHouseTraceWriter(store).write(agent_trace(300, trace_id=B).slice(0, 10))
    whole_sum = reader.trace(B, tenant=None).group_by("service_name", "name").agg(pl.len(), pl.col("duration_ns").sum())
    again = TraceViews(reader, RULES, max_read_spans=120).load(B, tenant=None)
    assert again is not None and again.operations is not None
    operations = again.operations
    assert int(operations["span_count"].sum()) == stored
    assert sorted(operations.select("service_name", "name", "span_count", "duration_ns_sum").rows()) == sorted(
        whole_sum.rows()
    )
    assert operations["duration_ns_sum"].is_sorted(descending=True)
    whole = TraceViews(reader, RULES).load(B, tenant=None)
    assert whole is not None and not whole.truncated and whole.size == stored and whole.operations is None
