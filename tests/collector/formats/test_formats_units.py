"""ID and time conversions: units (µs, ns) and padding, checked on values from the shared files."""

from __future__ import annotations

import pytest

from collector.formats.ids import hex_id, jaeger_model_id
from collector.formats.payload import SpanError
from collector.formats.times import go_duration_to_nanos, micros_to_nanos, rfc3339_to_nanos


@pytest.mark.parametrize(
    ("value", "digits", "expected"),
    [
        ("4b52eb0cabcb50a", 16, "04b52eb0cabcb50a"),  # Jaeger UI, leading zero dropped
        ("978883983d506fa5", 32, "0000000000000000978883983d506fa5"),  # 64-bit Zipkin trace ID
        ("84B3FAD94C6112EDD6AF3347D06F6F1D", 32, "84b3fad94c6112edd6af3347d06f6f1d"),
    ],
)
def test_hex_ids_are_padded_and_lowercased(value: str, digits: int, expected: str) -> None:
    assert hex_id(value, digits, "id") == expected


@pytest.mark.parametrize("value", ["span-1", "", "0" * 17, 42, None])
def test_bad_hex_ids_name_the_field(value: object) -> None:
    with pytest.raises(SpanError, match=r"^spanID "):
        hex_id(value, 16, "spanID")


def test_jaeger_domain_ids_are_base64_bytes() -> None:
    assert jaeger_model_id("AAAAAAAAAAAAAAAAAAAA/w==", 32, "traceId") == "000000000000000000000000000000ff"
    assert jaeger_model_id("AAAAAAAAAAI=", 16, "spanId") == "0000000000000002"
    with pytest.raises(SpanError, match="decodes to 4 bytes, expected 8"):
        jaeger_model_id("AAAAAA==", 16, "spanId")


def test_times_become_nanoseconds() -> None:
    assert micros_to_nanos(1485467191639875, "startTime") == 1485467191639875000
    assert micros_to_nanos("1485467191639875", "startTime") == 1485467191639875000
    assert rfc3339_to_nanos("2017-01-26T16:46:31.639875139-05:00", "startTime") == 1485467191639875139
    assert rfc3339_to_nanos("1970-01-01T00:00:01.5Z", "startTime") == 1_500_000_000
    for bad in (-1, "²", 1.5, True):
        with pytest.raises(SpanError, match="not a non-negative integer"):
            micros_to_nanos(bad, "timestamp")
    with pytest.raises(SpanError, match="not an RFC 3339 timestamp"):
        rfc3339_to_nanos("2017-01-26 16:46", "startTime")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("5000ns", 5_000),
        ("4000ns", 4_000),
        ("5µs", 5_000),
        ("1.5ms", 1_500_000),
        ("0.000005s", 5_000),  # protobuf JSON Duration
        ("1h2m3.5s", 3_723_500_000_000),
        ("0", 0),
    ],
)
def test_go_durations_become_nanoseconds(value: str, expected: int) -> None:
    assert go_duration_to_nanos(value, "duration") == expected


@pytest.mark.parametrize("value", ["5 ms", "ms", "-5ns", "5", "²s", 5])
def test_bad_durations_name_the_field(value: object) -> None:
    with pytest.raises(SpanError, match=r"^duration "):
        go_duration_to_nanos(value, "duration")
