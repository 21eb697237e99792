"""The reader queries the Jaeger APIs added (``search_spans``, ``dependencies``, status and kind filters), on a
real embedded ClickHouse with a small hand-made trace."""

from __future__ import annotations

from typing import Any

import pytest

from analysis import STAGES
from collector.ingest import Ingestor
from collector.otlp_json import request_from_json
from storage import trace_sql
from storage.analysis_store import ClickHouseAnalysisStore
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader, TraceQuery, build_search
from storage.tenancy import ALL_TENANTS

TRACE = "0af7651916cd43dd8448eb211c80319c"
OTHER = "1af7651916cd43dd8448eb211c80319c"
T0 = 1_700_000_000_000_000_000


def _span(trace: str, span: str, parent: str, name: str, kind: int, start_ms: int, **extra: Any) -> dict[str, Any]:
    return {
        "traceId": trace,
        "spanId": span,
        "parentSpanId": parent,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(T0 + start_ms * 1_000_000),
        "endTimeUnixNano": str(T0 + (start_ms + 10) * 1_000_000),
        **extra,
    }


def _export(ingestor: Ingestor, service: str, *spans: dict[str, Any]) -> None:
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                "scopeSpans": [{"spans": list(spans)}],
            }
        ]
    }
    request, rejections = request_from_json(body)
    assert rejections == []
    ingestor.export(request, [])


def _store(ingestor: Ingestor) -> None:
    """gateway → agent (→ agent, same service) → llm; gateway → tools; a second trace with only gateway."""
    _export(ingestor, "gateway", _span(TRACE, "a000000000000001", "", "POST /chat", 2, 0))
    agent = (
        _span(TRACE, "a000000000000002", "a000000000000001", "plan", 2, 1),
        _span(TRACE, "a000000000000003", "a000000000000002", "select tool", 1, 2),
    )
    _export(ingestor, "agent", *agent)
    _export(ingestor, "agent", *agent)  # an exporter retry: the same spans stored twice
    _export(
        ingestor,
        "llm",
        _span(TRACE, "a000000000000004", "a000000000000003", "chat", 2, 3, status={"code": 2, "message": "boom"}),
    )
    _export(ingestor, "tools", _span(TRACE, "a000000000000005", "a000000000000001", "search", 3, 4))
    _export(ingestor, "gateway", _span(OTHER, "b000000000000001", "", "GET /health", 2, 100))


@pytest.mark.both_layouts
def test_dependencies_count_cross_service_calls_once(reader: ClickHouseTraceReader, ingestor: Ingestor) -> None:
    _store(ingestor)
    end = T0 + 10**9
    assert reader.dependencies(T0, end, tenant=ALL_TENANTS) == [
        ("agent", "llm", 1),
        ("gateway", "agent", 1),
        ("gateway", "tools", 1),
    ]
    # The window is on the child span's start; the parent may start before it.
    assert reader.dependencies(T0 + 3_000_000, end, tenant=ALL_TENANTS) == [
        ("agent", "llm", 1),
        ("gateway", "tools", 1),
    ]
    assert reader.dependencies(end, end + 1, tenant=ALL_TENANTS) == []


@pytest.mark.both_layouts
def test_dependencies_count_the_calls_of_every_shard(reader: ClickHouseTraceReader, ingestor: Ingestor) -> None:
    """Eight traces a second apart, on both shards of the cluster layout (traces 1 and 8, the window's first and last,
    on the second shard): each shard's parents must be read from its own traces' time range, not one shard's."""
    for number in range(1, 9):
        trace = f"{number:032x}"
        _export(ingestor, "front", _span(trace, "c000000000000001", "", "GET /", 2, number * 1000))
        _export(ingestor, f"back{number}", _span(trace, "c000000000000002", "c000000000000001", "op", 2, number * 1000))
    assert reader.dependencies(T0, T0 + 10**10, tenant=ALL_TENANTS) == [
        ("front", f"back{number}", 1) for number in range(1, 9)
    ]


@pytest.mark.both_layouts
def test_dependencies_follow_each_spans_latest_copy_and_forget_dropped_traces(
    store: ClickHouse, reader: ClickHouseTraceReader, ingestor: Ingestor
) -> None:
    _store(ingestor)
    # The llm span exported again, more complete, by another service: a later copy of the same span, which counts.
    llm = _span(TRACE, "a000000000000004", "a000000000000003", "chat", 2, 3, status={"code": 2, "message": "late"})
    _export(ingestor, "llm-v2", llm)
    end = T0 + 10**9
    assert reader.dependencies(T0, end, tenant=ALL_TENANTS) == [
        ("agent", "llm-v2", 1),
        ("gateway", "agent", 1),
        ("gateway", "tools", 1),
    ]
    assert reader.dependencies(T0, end, tenant="default") == reader.dependencies(T0, end, tenant=ALL_TENANTS)
    assert reader.dependencies(T0, end, tenant="acme") == []
    # What tail sampling does to a dropped trace: its calls are no longer counted.
    ClickHouseAnalysisStore(store, STAGES).drop_traces("default", [TRACE], T0, end)
    assert reader.dependencies(T0, end, tenant=ALL_TENANTS) == []


@pytest.mark.both_layouts
def test_search_spans_returns_whole_traces(reader: ClickHouseTraceReader, ingestor: Ingestor) -> None:
    _store(ingestor)
    frame = reader.search_spans(TraceQuery(service="tools"), tenant=ALL_TENANTS)
    assert set(frame["trace_id"]) == {TRACE}
    assert frame.columns == reader.trace(TRACE, tenant=ALL_TENANTS).columns
    assert sorted(set(frame["span_id"])) == sorted(set(reader.trace(TRACE, tenant=ALL_TENANTS)["span_id"]))
    assert reader.search_spans(TraceQuery(service="nobody"), tenant=ALL_TENANTS).height == 0
    assert set(reader.search_spans(TraceQuery(service="gateway", limit=1), tenant=ALL_TENANTS)["trace_id"]) == {
        OTHER
    }  # newest


def test_status_and_kind_filters(reader: ClickHouseTraceReader, ingestor: Ingestor) -> None:
    _store(ingestor)
    assert set(reader.search(TraceQuery(status_code="Error"), tenant=ALL_TENANTS)["trace_id"]) == {TRACE}
    assert set(reader.search(TraceQuery(service="gateway", span_kind="Server"), tenant=ALL_TENANTS)["trace_id"]) == {
        TRACE,
        OTHER,
    }
    assert reader.search(TraceQuery(service="gateway", span_kind="Client"), tenant=ALL_TENANTS).height == 0
    assert set(reader.search(TraceQuery(span_kind="Client"), tenant=ALL_TENANTS)["trace_id"]) == {TRACE}


def test_user_values_only_travel_as_parameters() -> None:
    hostile = "x') OR 1=1 --"
    query = TraceQuery(service=hostile, status_code=hostile, span_kind=hostile, attributes=((hostile, hostile),))
    for template in (trace_sql.SEARCH, trace_sql.SEARCH_SPANS):
        sql, parameters = build_search(query, template)
        assert hostile not in sql
        assert {parameters[name] for name in ("service", "status_code", "span_kind", "attr_key_0")} == {hostile}
    assert build_search(TraceQuery())[0] == trace_sql.SEARCH.format(conditions="1", tenant=trace_sql.TENANT_FILTER)
