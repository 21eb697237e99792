"""Duration strings: Go's (``time.ParseDuration``), as Jaeger's query APIs take them (``150ms``, ``1.5s``,
``2m``), and Prometheus's, which add days and weeks (``3d``, ``1w``: SLO windows).

Grammar, as Go accepts it: an optional sign, then one or more ``<number><unit>`` parts (``1h2m3.5s``), where a
number is digits with an optional fraction (``1.``, ``.5`` and ``1.5`` are numbers, ``.`` is not) and a unit is
``ns``, ``us``, ``µs`` (micro sign), ``μs`` (Greek mu), ``ms``, ``s``, ``m`` or ``h``; with ``days=True`` also
``d`` (24 h) and ``w`` (7 d), as Prometheus reads them. ``0`` alone needs no unit. The value must fit Go's
``time.Duration``, a signed 64-bit count of **nanoseconds** (about 292 years).

Unlike Go, which sums each fraction through a float, the arithmetic here is exact and truncates to whole
nanoseconds, so ``0.0000000019s`` is 1 ns on both sides and nothing drifts by a nanosecond in between.
"""

from __future__ import annotations

import re
from fractions import Fraction

from units import NS_PER_DAY, NS_PER_H, NS_PER_MIN, NS_PER_MS, NS_PER_S, NS_PER_US

NS_PER_UNIT = {
    "ns": 1,
    "us": NS_PER_US,
    "µs": NS_PER_US,
    "μs": NS_PER_US,
    "ms": NS_PER_MS,
    "s": NS_PER_S,
    "m": NS_PER_MIN,
    "h": NS_PER_H,
}
"""Nanoseconds per Go duration unit."""
DAY_UNITS = {"d": NS_PER_DAY, "w": 7 * NS_PER_DAY}
"""Nanoseconds per unit Prometheus adds to Go's."""

MAX_DURATION_NS = 2**63 - 1
"""Largest Go duration, ns."""

_PART = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h|d|w)")


class DurationError(ValueError):
    """Not a Go duration, or one that overflows 64-bit nanoseconds."""


def parse_go_duration(text: str, *, days: bool = False) -> int:
    """``text`` as a signed count of **nanoseconds**; with ``days``, the units ``d`` and ``w`` too.

    Raises:
        DurationError: ``text`` is not a Go duration (the message quotes it, as Go's ``time: invalid
            duration "..."`` does), has a number of more digits than Python converts (4300 by default), or its
            magnitude exceeds :data:`MAX_DURATION_NS`.
    """
    units = NS_PER_UNIT | DAY_UNITS if days else NS_PER_UNIT
    sign, body = 1, text
    if body[:1] in ("+", "-"):
        sign, body = (-1 if body[0] == "-" else 1), body[1:]
    if body == "0":
        return 0
    total = Fraction(0)
    position = 0
    while position < len(body):
        match = _PART.match(body, position)
        if match is None or match[2] not in units:
            raise DurationError(f'time: invalid duration "{text}"')
        try:
            total += Fraction(match[1]) * units[match[2]]
        except ValueError:  # more digits than Python converts to a number (sys.get_int_max_str_digits)
            raise DurationError(f'time: invalid duration "{text}" (too many digits)') from None
        position = match.end()
    if position == 0:
        raise DurationError(f'time: invalid duration "{text}"')
    nanoseconds = int(total)
    if nanoseconds > MAX_DURATION_NS:
        raise DurationError(f'time: invalid duration "{text}" (overflows 64-bit nanoseconds)')
    return sign * nanoseconds


def parse_duration_param(text: str | None) -> int | None:
    """A query parameter that bounds a span's duration (Jaeger's ``minDuration``, Tempo's ``minDuration``): a
    non-negative Go duration as **nanoseconds**; ``None`` when absent or empty.

    Raises:
        DurationError: not a Go duration (:func:`parse_go_duration`), or negative.
    """
    if not text:
        return None
    nanoseconds = parse_go_duration(text)
    if nanoseconds < 0:
        raise DurationError(f"must not be negative, got {text!r}")
    return nanoseconds
