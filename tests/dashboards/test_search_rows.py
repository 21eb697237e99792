"""Pure helpers behind the search page: form parsing and its URL, text formatting, result rows."""

from __future__ import annotations

from urllib.parse import parse_qsl

import polars as pl
import pytest

from dashboards.format import attribute_dict, format_duration_ns, format_rate, format_time_ns
from dashboards.query_form import (
    LOOKBACKS,
    FormError,
    SearchForm,
    build_search,
    build_trace_query,
    form_from_url,
    form_to_url,
    normalize_trace_id,
    parse_attribute_filter,
)
from dashboards.search_rows import search_rows
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
    rates = (0.0, 12.0, 1234.6, 2 / 60, 3 / 3600, 2.44e-07, 1e-09)
    assert [format_rate(r) for r in rates] == [
        "0/s",
        "12.0/s",
        "1,235/s",
        "2.00/min",
        "3.00/h",
        "0.0211/day",
        "< 0.001/day",
    ]


def test_search_rows() -> None:
    summaries = pl.DataFrame(
        {
            "trace_id": ["0123456789abcdef" * 2, "fedcba9876543210" * 2],
            "root_service": ["gw", "gw"],
            "root_name": ["GET /", "POST /chat"],
            "start_time_unix_nano": [1_730_291_068_889_000_000, 1_730_291_068_889_000_000],
            "duration_ns": [7_276_144, 1],
            "span_count": [18, 3],
            "service_count": [4, 1],
            "error_count": [0, 1],
            "hotspot_count": [3, 0],
            "llm_calls": [None, 2],
            "input_tokens": [None, 1200],
            "output_tokens": [None, 80],
            "cost": [None, 0.0123],
            "currency": [None, "USD"],
            "dominant_stage": [None, "llm.decode"],
        }
    )
    first, second = search_rows(summaries, lambda trace_id: f"/ui/trace/{trace_id}")
    # The whole ID (a 16-character prefix is no ID the lookup box can find), its start on the line below.
    trace_id = "0123456789abcdef" * 2
    assert first["trace"] == f"[{trace_id}](/ui/trace/{trace_id})\n\n2024-10-30 12:24:28.889"
    assert first["duration_ns"] == 7_276_144
    assert first["start"] == "2024-10-30 12:24:28.889"
    assert (first["span_count"], first["service_count"], first["error_count"], first["hotspot_count"]) == (18, 4, 0, 3)
    assert (first["llm_calls"], first["cost"], first["dominant_stage"]) == (None, "", "")
    assert (second["llm_calls"], second["input_tokens"], second["output_tokens"]) == (2, 1200, 80)
    assert (second["cost"], second["dominant_stage"]) == ("0.0123", "LLM decode")


def test_search_form_round_trips_through_the_url() -> None:
    form = SearchForm(
        service="gw",
        operation="GET /",
        min_duration_ms=1.5,
        attributes='user="a b"',
        min_trace_ms=100_000,
        start="2024-10-30 12:00",
        end="2024-10-30T13:30:15",
        sort="longest",
        limit=50,
    )
    url = form_to_url(form)
    assert url.startswith("?") and "lookback" not in url  # defaults stay out of the URL
    assert form_from_url(dict(parse_qsl(url[1:]))) == form
    assert form_to_url(SearchForm()) == ""
    assert form_from_url({"limit": "x", "min_trace_ms": "", "unknown": "1"}) == SearchForm()


def test_search_form_to_trace_search() -> None:
    search = build_search(
        SearchForm(min_trace_ms=100_000, start="2024-10-30 12:00", end="2024-10-30 13:00", sort="most_errors"),
        NOW_NS,
    )
    assert search.min_trace_duration_ns == 100_000_000_000 and search.max_trace_duration_ns is None
    assert search.query.start_ns == 1_730_289_600_000_000_000  # 2024-10-30 12:00 UTC
    assert search.query.end_ns == search.query.start_ns + 3_600_000_000_000
    assert search.sort == "most_errors" and search.limit == 20
    lookback = build_search(SearchForm(lookback="1h"), NOW_NS)
    assert lookback.query.start_ns == NOW_NS - 3_600_000_000_000 and lookback.sort == "newest"
    for bad, message in [
        (SearchForm(start="yesterday"), "is not a time"),
        (SearchForm(start="2024-10-30 13:00", end="2024-10-30 12:00"), "ends before it starts"),
        (SearchForm(min_trace_ms=5, max_trace_ms=1), "above max trace"),
        (SearchForm(min_trace_ms=-1), "must not be negative"),
        (SearchForm(sort="loudest"), "unknown sort"),
    ]:
        with pytest.raises(FormError, match=message):
            build_search(bad, NOW_NS)
