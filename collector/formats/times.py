"""Timestamps and durations of Jaeger and Zipkin files, converted to integer **nanoseconds**.

Integer arithmetic throughout: a float cannot hold a nanosecond Unix timestamp exactly.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from collector.formats.payload import SpanError

_NS_PER_US = 1_000
_NS_PER_S = 1_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_RFC3339 = re.compile(
    r"(?P<base>\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d)(?:\.(?P<frac>\d{1,9})\d*)?(?P<tz>[Zz]|[+-]\d\d:\d\d)"
)
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # micro sign U+00B5, as Go writes it
    "μs": 1_000,  # Greek mu U+03BC, which Go also accepts
    "ms": 1_000_000,
    "s": _NS_PER_S,
    "m": 60 * _NS_PER_S,
    "h": 3600 * _NS_PER_S,
}


def micros_to_nanos(value: object, field: str) -> int:
    """A non-negative count of **microseconds** (Jaeger UI JSON, Zipkin v2) as nanoseconds.

    Accepts a JSON integer, an integral float, or a string of digits (some writers quote int64).
    Raises SpanError naming `field` otherwise.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpanError(f"{field} {value!r} is not a non-negative integer number of microseconds")
    return value * _NS_PER_US


def rfc3339_to_nanos(value: object, field: str) -> int:
    """An RFC 3339 timestamp with up to nanosecond digits and a zone (`2017-01-26T16:46:31.639875139-05:00`)
    as nanoseconds since the Unix epoch. Digits beyond nanoseconds are dropped.

    Raises SpanError naming `field` when `value` is not such a string.
    """
    match = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise SpanError(f"{field} {value!r} is not an RFC 3339 timestamp")
    tz = match["tz"].upper().replace("Z", "+00:00")
    try:
        whole = datetime.fromisoformat(match["base"].replace("t", "T") + tz)
    except ValueError as exc:
        raise SpanError(f"{field} {value!r} is not an RFC 3339 timestamp: {exc}") from None
    seconds = (whole - _EPOCH) // timedelta(seconds=1)
    return seconds * _NS_PER_S + int((match["frac"] or "0").ljust(9, "0"))


def go_duration_to_nanos(value: object, field: str) -> int:
    """A Go duration string (`5000ns`, `1.5ms`, `1h2m3s`; protobuf JSON's `0.000005s` is one too) as
    nanoseconds, rounded down to a whole nanosecond.

    Raises SpanError naming `field` when `value` is not a non-negative Go duration.
    """
    text = value.removeprefix("+") if isinstance(value, str) else ""
    if text == "0":  # the one unitless duration Go accepts
        return 0
    parts = _GO_DURATION_PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        raise SpanError(f"{field} {value!r} is not a duration such as '5000ns' or '1.5ms'")
    return int(sum(Decimal(number) * _GO_UNIT_NS[unit] for number, unit in parts))
