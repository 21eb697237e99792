"""Jaeger UI's Trace Statistics fixtures give the self times Jaeger UI shows for them.

The two traces are jaeger-ui's own test fixtures (``TracePage/TraceStatistics/tableValuesTestTrace/``); they
are imported through the real path (``collector.formats.read_payloads`` -> decoder -> chDB) and read back
with the reader, so the analysis sees exactly what the service would. Jaeger UI's expectations are in
``TraceStatistics/tableValues.test.js``; Jaeger UI shows ms rounded to two decimals with JavaScript's
``Math.round`` (:func:`shown`).
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

from analysis.self_time import self_time
from analysis.statistics import trace_statistics
from collector.formats import Payload, read_payloads
from collector.ingest import Ingestor
from collector.otlp_json import request_from_json
from storage.reader import ClickHouseTraceReader
from storage.tenancy import ALL_TENANTS
from testkit import TRACES

JAEGER = TRACES / "jaeger"


def shown(value_ms: float) -> float:
    """``value_ms`` as Jaeger UI displays it: ``Math.round(µs / 1000 * 100) / 100`` (halves round up), from
    the value in µs so that float noise in the last digit does not move a half."""
    return math.floor(round(value_ms * 1000, 6) / 10 + 0.5) / 100


def load(ingestor: Ingestor, reader: ClickHouseTraceReader, path: Path) -> pl.DataFrame:
    trace_ids = set()
    for payload in read_payloads(path):
        assert isinstance(payload, Payload), payload
        result = ingestor.export(*request_from_json(payload.body))
        assert result.rejected == 0, result.error_message
        trace_ids |= {
            s["traceId"] for rs in payload.body["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
        }
    (trace_id,) = trace_ids
    return reader.trace(trace_id, tenant=ALL_TENANTS)


def statistics_row(table: pl.DataFrame, service: str, name: str) -> dict[str, object]:
    (row,) = table.filter((pl.col("service_name") == service) & (pl.col("name") == name)).to_dicts()
    return row


def test_trace_normal(ingestor: Ingestor, reader: ClickHouseTraceReader) -> None:
    # Times in µs after the root's start (1579070675083000):
    #   150c api-gateway     GET /api/customer/owners/8/pets/10   [0, 4902]      root
    #   22be api-gateway     GET /owners/8/pets/10                [820, 3319]    child of 150c
    #   e821 customers-svc   GET /owners/8/pets/10                [1200, 2939]   child of 22be
    #   4085 customers-svc   HikariProxyPreparedStatement...      [2059, 2080]   child of e821
    #   622a customers-svc   HikariProxyPreparedStatement...      [2840, 2892]   child of e821
    # Self times: 150c 4902 - 2499 = 2403; 22be 2499 - 1739 = 760; e821 1739 - 21 - 52 = 1666; 4085 21; 622a 52.
    # Trace duration 4902 µs. Jaeger UI (Service Name, Operation Name) shows:
    #   api-gateway / GET /api/customer/...: total 4.9, self 2.4, percent 2403/4902 = 49.02
    #   api-gateway / GET /owners/8/pets/10: total 2.5, self 0.76, percent 760/4902 = 15.5
    #   customers-service / GET /owners/8/pets/10: total 1.74, self 1.67, percent 1666/4902 = 33.99
    #   customers-service / Hikari...: count 2, total 0.07, avg 0.04 (36.5 µs), min 0.02, max 0.05, percent 1.49
    spans = load(ingestor, reader, JAEGER / "jaegerui__stats_testTraceNormal.json")
    assert dict(self_time(spans).select("span_id", "self_time_ns").iter_rows()) == {
        "150c193cf155b46b": 2_403_000,
        "22be69e72cbcde0b": 760_000,
        "e821b549888cbc3b": 1_666_000,
        "4085dddb47429851": 21_000,
        "622a5079b565623e": 52_000,
    }
    table = trace_statistics(spans)
    expected = {
        ("api-gateway", "GET /api/customer/owners/8/pets/10"): (1, 4.9, 4.9, 4.9, 4.9, 2.4, 2.4, 2.4, 2.4, 49.02),
        ("api-gateway", "GET /owners/8/pets/10"): (1, 2.5, 2.5, 2.5, 2.5, 0.76, 0.76, 0.76, 0.76, 15.5),
        ("customers-service", "GET /owners/8/pets/10"): (1, 1.74, 1.74, 1.74, 1.74, 1.67, 1.67, 1.67, 1.67, 33.99),
        ("customers-service", "HikariProxyPreparedStatement.executeQuery"): (
            2,
            0.07,
            0.04,
            0.02,
            0.05,
            0.07,
            0.04,
            0.02,
            0.05,
            1.49,
        ),
    }
    columns = ("total_ms", "avg_ms", "min_ms", "max_ms", "self_total_ms", "self_avg_ms", "self_min_ms", "self_max_ms")
    for (service, name), (count, *values, percent) in expected.items():
        row = statistics_row(table, service, name)
        assert row["count"] == count
        assert [shown(row[c]) for c in columns] == values, (service, name)
        assert shown(row["percent"]) == percent
    by_service = trace_statistics(spans, group_by=["service_name"])
    # Jaeger UI's "Service Name" table: api-gateway self 3.16 (64.52 %), customers-service self 1.74 (35.48 %).
    gateway, customers = (statistics_row_by(by_service, s) for s in ("api-gateway", "customers-service"))
    assert (gateway["count"], shown(gateway["total_ms"]), shown(gateway["self_total_ms"])) == (2, 7.4, 3.16)
    assert (shown(gateway["self_min_ms"]), shown(gateway["self_max_ms"]), shown(gateway["percent"])) == (
        0.76,
        2.4,
        64.52,
    )
    assert (customers["count"], shown(customers["total_ms"]), shown(customers["self_total_ms"])) == (3, 1.81, 1.74)
    assert shown(customers["percent"]) == 35.48


def statistics_row_by(table: pl.DataFrame, service: str) -> dict[str, object]:
    (row,) = table.filter(pl.col("service_name") == service).to_dicts()
    return row


def test_span_longer_than_its_parent(ingestor: Ingestor, reader: ClickHouseTraceReader) -> None:
    # Times in µs after the root's start (1573196810396000); IDs as imported (left-padded to 16 hex digits):
    #   ab49 api-gateway   GET /api/customer/owners/8/pets/10  [0, 12887]     root
    #   6745 api-gateway   GET /owners/8/pets/10               [1636, 11157]  child of ab49
    #   4b52 customers     GET /owners/8/pets/10               [2782, 10011]  child of 6745
    #   0a00 customers     GET /owners/8/pets/10               [2782, 10011]  child of 6745 (same interval)
    #   0001 customers     GET /owners/8/pets/10               [10080, 11580] child of 6745, overflows it
    #   0002 customers     GET /owners/8/pets/10               [10440, 13940] child of 6745, overflows the root
    #   afa5, d72e customers Hikari...                          [7381, 7796], [8366, 8509] children of 4b52
    # 6745: children cut to [1636, 11157] cover [2782, 10011] u [10080, 11157] = 7229 + 1077 = 8306
    #       -> self 9521 - 8306 = 1215 µs, which Jaeger UI shows as 1.22 (tableValues.test.js:
    #       "span is longer as parent", resultArray[2].selfTotal). ab49: 12887 - 9521 = 3366.
    #   4b52: 7229 - 415 - 143 = 6671; 0a00 7229; 0001 1500; 0002 3500; afa5 415; d72e 143.
    # Trace duration (Jaeger: last end - first start) = 13940 µs.
    spans = load(ingestor, reader, JAEGER / "jaegerui__stats_spanLongerAsParent.json")
    assert dict(self_time(spans).select("span_id", "self_time_ns").iter_rows()) == {
        "ab496a7591486ffd": 3_366_000,
        "6745965d0b964193": 1_215_000,
        "04b52eb0cabcb50a": 6_671_000,
        "00a0000000000000": 7_229_000,
        "0000000000000001": 1_500_000,
        "0000000000000002": 3_500_000,
        "afa59bdef0fc2561": 415_000,
        "d72e44f0b9a0a6ce": 143_000,
    }
    table = trace_statistics(spans)
    gateway_child = statistics_row(table, "api-gateway", "GET /owners/8/pets/10")
    assert shown(gateway_child["self_total_ms"]) == 1.22
    assert gateway_child["percent"] == pytest.approx(100 * 1215 / 13940)
    customers = statistics_row(table, "customers-service", "GET /owners/8/pets/10")
    # 4 spans: total 7229 + 7229 + 1500 + 3500 = 19458 µs; self 6671 + 7229 + 1500 + 3500 = 18900 µs.
    assert customers["count"] == 4
    assert customers["total_ms"] == pytest.approx(19.458)
    assert customers["self_total_ms"] == pytest.approx(18.9)
    assert (customers["self_min_ms"], customers["self_max_ms"]) == pytest.approx((1.5, 7.229))
