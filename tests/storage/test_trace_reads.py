"""The reads of one trace by its ID (``storage.reader.ClickHouseTraceReader``: ``trace``, ``trace_page``,
``trace_size``, ``trace_state``, ``trace_operations``) and of the traces a search finds (``search``,
``ranked_search``, ``search_spans``, ``matched_spans``), bounded by the traces' time range from
``otel_traces_trace_id_ts`` (``storage.trace_sql.in_time_range_of``): every span is still read, whichever insert,
day or tenant it came in, on one node and on the two-shard harness; without a lookup row, or with a span the lookup
cannot hold, the read is unbounded; and the bound prunes the days the trace does not touch."""

from __future__ import annotations

import re

import pytest
from pipeline.pipeline_support import T0, Span, otlp_request

from collector.batch import to_batch
from collector.otlp_json import request_from_json
from storage import trace_sql
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader, TraceQuery
from storage.schema import with_tenant
from storage.tenancy import tenant_parameters
from storage.writer import OnceWriter

DAY_NS = 86_400 * 10**9
TRACE = "ab" * 16
NEIGHBOUR = "cd" * 16
ONE_TRACE_READS = {
    "TRACE_SPANS": trace_sql.TRACE_SPANS,
    "TRACE_PAGE": trace_sql.TRACE_PAGE,
    "TRACE_HAS_MORE": trace_sql.TRACE_HAS_MORE,
    "TRACE_SIZE": trace_sql.TRACE_SIZE,
    "TRACE_STATE": trace_sql.TRACE_STATE,
    "TRACE_OPERATIONS": trace_sql.TRACE_OPERATIONS,
}
"""The SQL of every read of one trace by its ID."""
MATCHED_READS = {
    "SEARCH": trace_sql.SEARCH,
    "RANKED_SEARCH": trace_sql.RANKED_SEARCH,
    "SEARCH_SPANS": trace_sql.SEARCH_SPANS,
}
"""The SQL of every read of the rows of the traces a search finds (``matched``)."""


def _store(store: ClickHouse, trace_id: str, spans: list[Span], t0_ns: int, tenant: str = "default") -> None:
    """``spans`` of ``trace_id`` (times relative to ``t0_ns``) stored for ``tenant``, as one insert."""
    batch = with_tenant(to_batch(*request_from_json(otlp_request(trace_id, spans, t0_ns))).table, tenant)
    OnceWriter(store).store(tables=[batch])


def _span(index: int, parent: int, service: str, start_ms: float = 0) -> Span:
    return Span(f"{index:016x}", f"{parent:016x}" if parent else "", service, f"op {index}", start_ms, start_ms + 5)


def _span_ids(reader: ClickHouseTraceReader, tenant: str | None) -> list[str]:
    return reader.trace(TRACE, tenant=tenant)["span_id"].to_list()


def _late_trace(store: ClickHouse) -> None:
    """:data:`TRACE` over three days in three inserts (a late span two days after the first), a span of another
    tenant under the same ID a day before, and a neighbour trace in the same second."""
    _store(store, TRACE, [_span(1, 0, "api"), _span(2, 1, "db", 1)], T0)
    _store(store, TRACE, [_span(3, 1, "llm")], T0 + 2 * DAY_NS)
    _store(store, TRACE, [_span(4, 0, "other")], T0 - DAY_NS, tenant="acme")
    _store(store, NEIGHBOUR, [_span(1, 0, "api")], T0)


@pytest.mark.parametrize("name", list(ONE_TRACE_READS))
def test_every_read_of_one_trace_is_bounded_by_its_time_range(name: str) -> None:
    sql = ONE_TRACE_READS[name]
    assert len(re.findall(r"FROM otel_traces\b", sql)) == sql.count(trace_sql.TRACE_WHERE) >= 1


@pytest.mark.both_layouts
def test_a_trace_stored_over_days_inserts_and_tenants_is_read_whole(store: ClickHouse) -> None:
    _late_trace(store)
    reader = ClickHouseTraceReader(store)
    assert _span_ids(reader, "default") == [f"{index:016x}" for index in (1, 2, 3)]
    assert sorted(_span_ids(reader, None)) == [f"{index:016x}" for index in (1, 2, 3, 4)]
    assert _span_ids(reader, "acme") == [f"{4:016x}"]
    assert reader.trace_size(TRACE, tenant="default") == 3
    assert reader.trace_state(TRACE, tenant="default")[:2] == (3, 3)
    assert sorted(reader.trace_operations(TRACE, tenant="default")["service_name"].to_list()) == ["api", "db", "llm"]
    first = reader.trace_page(TRACE, tenant="default", limit=2)
    assert first.spans["span_id"].to_list() == [f"{1:016x}", f"{2:016x}"] and first.next is not None
    last = reader.trace_page(TRACE, tenant="default", after=first.next, limit=2)
    assert last.spans["span_id"].to_list() == [f"{3:016x}"] and last.next is None


@pytest.mark.parametrize("name", list(MATCHED_READS))
def test_every_read_of_the_found_traces_is_bounded_by_their_time_range(name: str) -> None:
    sql = MATCHED_READS[name]
    # One read of otel_traces finds the traces (the matched CTE, and RANKED_TRACES' subquery); the other reads them.
    finds = 2 if name == "RANKED_SEARCH" else 1
    assert len(re.findall(r"FROM otel_traces\b", sql)) - finds == sql.count(trace_sql.IN_MATCHED) == 1
    assert sql.count(trace_sql.MATCHED_IDS) == 1


@pytest.mark.both_layouts
def test_a_trace_found_by_a_late_span_is_searched_whole(store: ClickHouse) -> None:
    _late_trace(store)
    reader = ClickHouseTraceReader(store)
    # Only span 3 matches, two days after spans 1 and 2: a bound by the matched span's day would lose them.
    query = TraceQuery(service="llm")
    expected = {
        "trace_id": TRACE,
        "root_service": "api",
        "root_name": "op 1",
        "start_time_unix_nano": T0,
        "duration_ns": 2 * DAY_NS + 5_000_000,
        "span_count": 3,
        "service_count": 3,
    }
    for found in (reader.search(query, tenant="default"), reader.ranked_search(query, "oldest", tenant="default")):
        assert found.height == 1
        assert {key: found.row(0, named=True)[key] for key in expected} == expected
    assert reader.search_spans(query, tenant="default")["span_id"].to_list() == [f"{i:016x}" for i in (1, 2, 3)]
    every = reader.matched_spans([TRACE], TraceQuery(), tenant="default", per_trace=10)
    assert every["span_id"].to_list() == [f"{i:016x}" for i in (1, 2, 3)]
    store.command(f"TRUNCATE TABLE {store.layout.table('otel_traces_trace_id_ts')}")  # read unbounded
    assert reader.search(query, tenant="default")["span_count"].to_list() == [3]
    assert reader.search_spans(query, tenant="default")["span_id"].to_list() == [f"{i:016x}" for i in (1, 2, 3)]


@pytest.mark.both_layouts
def test_the_latest_copy_of_a_late_span_is_read_once(store: ClickHouse) -> None:
    _late_trace(store)
    longer = Span(f"{3:016x}", f"{1:016x}", "llm", "op 3", 0, 9)
    _store(store, TRACE, [longer], T0 + 2 * DAY_NS)  # a second copy of span 3, more complete
    trace = ClickHouseTraceReader(store).trace(TRACE, tenant="default")
    assert trace["span_id"].to_list() == [f"{index:016x}" for index in (1, 2, 3)]
    assert trace["duration_ns"].to_list() == [5_000_000, 5_000_000, 9_000_000]


@pytest.mark.both_layouts
def test_a_trace_the_lookup_does_not_cover_is_read_unbounded(store: ClickHouse) -> None:
    _late_trace(store)
    # A span in 2128, after 2106-02-07: the lookup's DateTime saturates there, and toDateTime(Timestamp) wraps around
    # to 1992, before the trace's first span; then no lookup rows at all.
    _store(store, TRACE, [_span(5, 1, "far")], 5_000_000_000 * 10**9)
    reader = ClickHouseTraceReader(store)
    assert _span_ids(reader, "default") == [f"{index:016x}" for index in (1, 2, 3, 5)]
    store.command(f"TRUNCATE TABLE {store.layout.table('otel_traces_trace_id_ts')}")
    assert _span_ids(reader, "default") == [f"{index:016x}" for index in (1, 2, 3, 5)]
    assert reader.trace_size(TRACE, tenant="default") == 4
    assert reader.trace("ef" * 16, tenant="default").height == 0


@pytest.mark.parametrize("layout", ["one_node"])  # the plan of a read of the Distributed table is the shards'
def test_the_time_range_prunes_the_days_the_trace_does_not_touch(store: ClickHouse) -> None:
    for day in range(4):
        _store(store, f"{day + 1:032x}", [_span(1, 0, "api")], T0 + day * DAY_NS)
    parameters = {"trace_id": f"{2:032x}", **tenant_parameters("default")}
    plan = "\n".join(row[0] for row in store.query_rows(f"EXPLAIN indexes = 1 {trace_sql.TRACE_SPANS}", parameters))
    # One day's part of four is read (by the time column's min-max index); by the trace ID alone, all four.
    assert re.search(r"Min-Max\s+Keys:\s+Timestamp\s+Condition: .*\s+Parts: 1/4", plan), plan
