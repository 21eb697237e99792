"""Go duration strings (``time.ParseDuration``), as Jaeger's query APIs take them: ``150ms``, ``1.5s``, ``2m``.

Grammar, as Go accepts it: an optional sign, then one or more ``<number><unit>`` parts (``1h2m3.5s``), where a
number is digits with an optional fraction (``1.``, ``.5`` and ``1.5`` are numbers, ``.`` is not) and a unit is
``ns``, ``us``, ``µs`` (micro sign), ``μs`` (Greek mu), ``ms``, ``s``, ``m`` or ``h``. ``0`` alone needs no unit.
The value must fit Go's ``time.Duration``, a signed 64-bit count of **nanoseconds** (about 292 years).

Unlike Go, which sums each fraction through a float, the arithmetic here is exact and truncates to whole
nanoseconds, so ``0.0000000019s`` is 1 ns on both sides and nothing drifts by a nanosecond in between.
"""

from __future__ import annotations

import re
from fractions import Fraction

NS_PER_UNIT = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
"""Nanoseconds per Go duration unit."""

MAX_DURATION_NS = 2**63 - 1
"""Largest Go duration, ns."""

_PART = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


class DurationError(ValueError):
    """Not a Go duration, or one that overflows 64-bit nanoseconds."""


def parse_go_duration(text: str) -> int:
    """``text`` as a signed count of **nanoseconds**.

    Raises:
        DurationError: ``text`` is not a Go duration (the message quotes it, as Go's ``time: invalid
            duration "..."`` does) or its magnitude exceeds :data:`MAX_DURATION_NS`.
    """
    sign, body = 1, text
    if body[:1] in ("+", "-"):
        sign, body = (-1 if body[0] == "-" else 1), body[1:]
    if body == "0":
        return 0
    total = Fraction(0)
    position = 0
    while position < len(body):
        match = _PART.match(body, position)
        if match is None:
            raise DurationError(f'time: invalid duration "{text}"')
        total += Fraction(match[1]) * NS_PER_UNIT[match[2]]
        position = match.end()
    if position == 0:
        raise DurationError(f'time: invalid duration "{text}"')
    nanoseconds = int(total)
    if nanoseconds > MAX_DURATION_NS:
        raise DurationError(f'time: invalid duration "{text}" (overflows 64-bit nanoseconds)')
    return sign * nanoseconds
