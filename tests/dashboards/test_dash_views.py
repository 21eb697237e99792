"""Pure helpers behind the pages: form parsing, text formatting, header facts, span details, result rows."""

from __future__ import annotations

import polars as pl
import pytest

from dashboards.format import attribute_dict, format_duration_ns, format_time_ns
from dashboards.query_form import (
    LOOKBACKS,
    FormError,
    SearchForm,
    build_trace_query,
    normalize_trace_id,
    parse_attribute_filter,
)
from dashboards.views import search_rows
from storage.reader import TraceQuery

NOW_NS = 1_800_000_000_000_000_000


def test_attribute_filter_parsing() -> None:
    assert parse_attribute_filter(None) == ()
    assert parse_attribute_filter("  ") == ()
    assert parse_attribute_filter('http.status_code=500 user="a b" empty= x==y') == (
        ("http.status_code", "500"),
        ("user", "a b"),
        ("empty", ""),
        ("x", "=y"),
    )
    for bad in ("novalue", "=v", 'k="open'):
        with pytest.raises(FormError, match="attribute filter"):
            parse_attribute_filter(bad)


def test_search_form_to_trace_query() -> None:
    query = build_trace_query(
        SearchForm(
            service="gw",
            operation="",
            min_duration_ms=1.5,
            max_duration_ms=250,
            lookback="1h",
            attributes="tenant=acme",
            status="Error",
            limit=50,
        ),
        NOW_NS,
    )
    assert query == TraceQuery(
        service="gw",
        operation=None,
        start_ns=NOW_NS - 3_600_000_000_000,
        end_ns=None,
        min_duration_ns=1_500_000,
        max_duration_ns=250_000_000,
        attributes=(("tenant", "acme"),),
        status_code="Error",
        limit=50,
    )
    everything = build_trace_query(SearchForm(limit=None), NOW_NS)
    assert everything.start_ns is None and everything.limit == 20
    assert LOOKBACKS["all"][1] is None


@pytest.mark.parametrize(
    ("form", "message"),
    [
        (SearchForm(min_duration_ms=-1), "must not be negative"),
        (SearchForm(min_duration_ms=5, max_duration_ms=1), "above max"),
        (SearchForm(lookback="1y"), "unknown lookback"),
        (SearchForm(status="Failed"), "unknown status"),
        (SearchForm(limit=0), "limit"),
        (SearchForm(limit=100_000), "limit"),
    ],
)
def test_search_form_errors(form: SearchForm, message: str) -> None:
    with pytest.raises(FormError, match=message):
        build_trace_query(form, NOW_NS)


def test_trace_id_normalization() -> None:
    assert normalize_trace_id(" ABCDEF0123456789ABCDEF0123456789 ") == "abcdef0123456789abcdef0123456789"
    assert normalize_trace_id("00000000000000ff") == "0" * 30 + "ff"
    for bad in (None, "", "xyz", "abc", "g" * 32, "a" * 33):
        with pytest.raises(FormError):
            normalize_trace_id(bad)


def test_formatting() -> None:
    assert [format_duration_ns(v) for v in (0, 999, 12_500, 850_000, 12_345_678, 1_520_000_000, 150e9)] == [
        "0 ns",
        "999 ns",
        "12.5 µs",
        "850 µs",
        "12.35 ms",
        "1.52 s",
        "2.5 min",
    ]
    assert format_time_ns(1_730_291_068_889_123_456) == "2024-10-30 12:24:28.889 UTC"
    assert format_time_ns(1_730_291_068_889_123_456, zone=False) == "2024-10-30 12:24:28.889"
    assert attribute_dict({"a": "1", "b": None}) == {"a": "1"}
    assert attribute_dict([{"key": "a", "value": "1"}]) == {"a": "1"}
    assert attribute_dict(None) == {}


def test_search_rows() -> None:
    summaries = pl.DataFrame(
        {
            "trace_id": ["0123456789abcdef" * 2],
            "root_service": ["gw"],
            "root_name": ["GET /"],
            "start_time_unix_nano": [1_730_291_068_889_000_000],
            "duration_ns": [7_276_144],
            "span_count": [18],
            "service_count": [4],
            "error_count": [0],
            "hotspot_count": [3],
        }
    )
    (row,) = search_rows(summaries, lambda trace_id: f"/ui/trace/{trace_id}")
    assert row["trace"] == f"[0123456789abcdef](/ui/trace/{'0123456789abcdef' * 2})"
    assert row["duration_ms"] == 7.276
    assert row["start"] == "2024-10-30 12:24:28.889"
    assert (row["span_count"], row["service_count"], row["error_count"], row["hotspot_count"]) == (18, 4, 0, 3)
