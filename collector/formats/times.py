"""Timestamps and durations of Jaeger and Zipkin files, converted to integer **nanoseconds**.

Integer arithmetic throughout: a float cannot hold a nanosecond Unix timestamp exactly.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from collector.formats.payload import SpanError
from units import NS_PER_S, NS_PER_US
from units.durations import DurationError, parse_go_duration

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_RFC3339 = re.compile(
    r"(?P<base>\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d)(?:\.(?P<frac>\d{1,9})\d*)?(?P<tz>[Zz]|[+-]\d\d:\d\d)"
)


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
    return value * NS_PER_US


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
    return seconds * NS_PER_S + int((match["frac"] or "0").ljust(9, "0"))


def go_duration_to_nanos(value: object, field: str) -> int:
    """A Go duration string (`5000ns`, `1.5ms`, `1h2m3s`; protobuf JSON's `0.000005s` is one too) as
    nanoseconds, rounded down to a whole nanosecond.

    Raises SpanError naming `field` when `value` is not a non-negative Go duration.
    """
    text = value if isinstance(value, str) else ""
    try:
        nanoseconds = parse_go_duration(text)
    except DurationError:
        nanoseconds = -1
    if nanoseconds < 0 or text.startswith("-"):
        raise SpanError(f"{field} {value!r} is not a duration such as '5000ns' or '1.5ms'")
    return nanoseconds
