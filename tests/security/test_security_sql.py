"""The trace reader's SQL: every read of ``otel_traces`` carries the tenant condition, and the tenant travels
as a bound parameter, never as SQL text. Checked on the SQL the reader actually sends (a recording store)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pytest

from storage import trace_sql
from storage.engine_reader import ClickHouseEngineReader, EngineWindow
from storage.layout import SINGLE_NODE, Layout
from storage.reader import ClickHouseTraceReader, TraceQuery
from storage.tenancy import ALL_TENANTS, tenant_condition
from storage.traceql import Comparison, Field, Spanset, SpansetOp


class RecordingStore:
    """Stands in for :class:`storage.clickhouse.ClickHouse`: records each statement and answers nothing, but for the
    trace-ID lookup's question which traces overlap a window (:func:`storage.trace_sql.overlapping_traces`), which
    ClickHouse answers with one row always: here, one trace in each window, so the read it bounds is sent too."""

    def __init__(self, layout: Layout = SINGLE_NODE) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.layout = layout
        self.database = "db"

    def query_rows(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[tuple]:
        self.sent.append((sql, dict(parameters or {})))
        windows = sorted(name for name in parameters or {} if name.startswith("from_"))
        if "FROM otel_traces_trace_id_ts" in sql and windows:
            return [tuple((parameters[name], parameters[name], 1) for name in windows)]
        return []

    def query_arrow(
        self, sql: str, parameters: Mapping[str, Any] | None = None, settings: Mapping[str, Any] | None = None
    ) -> pa.Table:
        self.sent.append((sql, dict(parameters or {})))
        return pa.table({})


QUERY = TraceQuery(service="s", operation="o", attributes=(("k", "v"),), status_code="Error", min_duration_ns=1)
_SPANSET = Spanset(Comparison(Field("any", "k"), "=", "v"))
TRACEQL = TraceQuery(span_filter=SpansetOp("&&", SpansetOp(">>", _SPANSET, _SPANSET), _SPANSET))
"""A TraceQL search whose subqueries (``&&``) and recursive walk (``>>``) each read ``otel_traces`` again."""
READS = {
    "services": lambda r, t: r.services(tenant=t),
    "operations": lambda r, t: r.operations("s", tenant=t),
    "search": lambda r, t: r.search(QUERY, tenant=t),
    "trace": lambda r, t: r.trace("0" * 32, tenant=t),
    "search_spans": lambda r, t: r.search_spans(QUERY, tenant=t),
    "dependencies": lambda r, t: r.dependencies(0, 1, tenant=t),
    "traceql_search": lambda r, t: r.ranked_search(TRACEQL, "newest", tenant=t),
    "matched_spans": lambda r, t: r.matched_spans(["0" * 32], TRACEQL, tenant=t, per_trace=3),
    "tag_names": lambda r, t: r.tag_names("span", 0, 1, tenant=t, limit=10),
    "tag_values": lambda r, t: r.tag_values("span", "k", 0, 1, tenant=t, limit=10),
}


@pytest.mark.parametrize("read", list(READS))
@pytest.mark.parametrize("tenant", ["acme", ALL_TENANTS])
def test_every_read_of_otel_traces_is_tenant_filtered(read: str, tenant: str | None) -> None:
    store = RecordingStore()
    READS[read](ClickHouseTraceReader(store), tenant)  # type: ignore[arg-type]
    # The trace-ID → time-range lookup (otel_traces_trace_id_ts) holds no span data, only bounds a read.
    ((sql, parameters),) = [sent for sent in store.sent if re.search(r"FROM otel_traces\b", sent[0])]
    span_reads = len(re.findall(r"FROM otel_traces\b", sql))
    assert span_reads >= 1
    assert span_reads == sql.count(trace_sql.TENANT_FILTER)
    assert parameters["tenant"] == (tenant or "") and parameters["all_tenants"] is (tenant is None)
    assert "acme" not in sql


@pytest.mark.parametrize("tenant", ["acme", ALL_TENANTS])
def test_the_dependencies_run_on_each_shard_tenant_filtered(tenant: str | None) -> None:
    store = RecordingStore(Layout("c", replicated=False))
    ClickHouseTraceReader(store).dependencies(0, 1, tenant=tenant)  # type: ignore[arg-type]
    (lookup, _), (sql, parameters) = store.sent
    # The traces' time ranges come from every shard's lookup rows (the Distributed table) before the read; then each
    # shard reads its own spans, once, and finds its own calls; the initiator only sums what they found.
    assert "FROM otel_traces_trace_id_ts" in lookup and "_local" not in lookup
    assert "FROM cluster('c', view(" in sql and not re.search(r"FROM otel_traces\b", sql)
    assert len(re.findall(r"FROM db\.otel_traces_local\b", sql)) == sql.count(trace_sql.TENANT_FILTER) == 1
    assert parameters["tenant"] == (tenant or "") and "acme" not in sql


@pytest.mark.parametrize("tenant", ["acme", ALL_TENANTS])
def test_the_throughput_latency_read_is_tenant_filtered(tenant: str | None) -> None:
    store = RecordingStore()
    ClickHouseEngineReader(store).engine_buckets(EngineWindow(0, 1, 1, model="m"), tenant=tenant)  # type: ignore[arg-type]
    ((sql, parameters),) = store.sent
    # Two tables, each read under the owner-tenant condition: the requests and the dropped traces.
    assert re.findall(r"\bFROM (\w+)", sql) == ["hotspan_trace_summary_by_time", "hotspan_engine_requests"]
    assert sql.count(tenant_condition()) == 2
    assert parameters["tenant"] == (tenant or "") and parameters["model"] == "m"
    assert "acme" not in sql and "'m'" not in sql


def test_a_bad_tenant_name_never_reaches_the_store() -> None:
    store = RecordingStore()
    with pytest.raises(ValueError):
        ClickHouseTraceReader(store).services(tenant="x' OR 1=1 --")  # type: ignore[arg-type]
    assert store.sent == []


def test_reads_need_an_explicit_tenant() -> None:
    reader = ClickHouseTraceReader(RecordingStore())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        reader.services()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        reader.trace("0" * 32)  # type: ignore[call-arg]
