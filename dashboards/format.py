"""Text for people: durations, timestamps and attribute maps as the UI shows them."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from datetime import UTC, datetime

from analysis.genai import FIRST_TOKEN_MS_KEYS, FIRST_TOKEN_SECONDS_KEYS, TOKEN_KEYS
from units import NS_PER_MS

SECONDS_ATTRIBUTE_PREFIXES = ("gen_ai.latency.",)
"""Attribute keys under these prefixes hold seconds (vLLM's ``gen_ai.latency.*``)."""
SECONDS_ATTRIBUTES = frozenset(FIRST_TOKEN_SECONDS_KEYS)
MILLISECONDS_ATTRIBUTES = frozenset(FIRST_TOKEN_MS_KEYS)
TOKEN_ATTRIBUTES = frozenset(key for keys in TOKEN_KEYS.values() for key in keys)


def format_duration_ns(duration_ns: int | float) -> str:
    """A duration (ns) in the unit a reader expects: ``"0 ns"``, ``"12.5 µs"``, ``"850 µs"``, ``"12.35 ms"``,
    ``"1.52 s"``, ``"2.5 min"``."""
    value = float(duration_ns)
    if value < 1_000:
        return f"{value:.0f} ns"
    if value < 1_000_000:
        return f"{value / 1_000:.1f} µs" if value < 100_000 else f"{value / 1_000:.0f} µs"
    if value < 1_000_000_000:
        return f"{value / 1_000_000:.2f} ms"
    if value < 60_000_000_000:
        return f"{value / 1_000_000_000:.2f} s"
    return f"{value / 60_000_000_000:.1f} min"


def format_tokens(count: int | float | None) -> str:
    """A token count with its unit: ``"1,234 tokens"``, ``"1 token"``; ``"—"`` for None."""
    if count is None or count != count:
        return "—"
    return f"{int(count):,} token{'' if int(count) == 1 else 's'}"


def format_attribute(key: str, value: str) -> str:
    """An attribute's value as people read it: a duration with its unit where the key is known to hold seconds
    (vLLM's ``gen_ai.latency.*``, the GenAI first-chunk delays) or milliseconds (the Vercel AI SDK's
    ``ai.response.msToFirstChunk``), followed by the raw value; a token count with "tokens"; anything else as
    stored."""
    try:
        number = float(value)
    except ValueError:
        return value
    if not math.isfinite(number):
        return value
    if key in SECONDS_ATTRIBUTES or key.startswith(SECONDS_ATTRIBUTE_PREFIXES):
        return f"{format_duration_ns(number * 1e9)} ({value} s)"
    if key in MILLISECONDS_ATTRIBUTES:
        return f"{format_duration_ns(number * 1e6)} ({value} ms)"
    if key in TOKEN_ATTRIBUTES and number == int(number):
        return format_tokens(number)
    return value


def format_share(share: float | None) -> str:
    """A share in [0, 1] as a percentage, ``"—"`` for None or NaN."""
    return "—" if share is None or share != share else f"{share:.1%}"


def format_per_second(value: float | None, unit: str) -> str:
    """A rate with its unit, three significant digits below 100: ``"1.50 req/s"``, ``"0.0420 req/s"``,
    ``"1,235 req/s"``; ``"—"`` for None or NaN."""
    if value is None or value != value:
        return "—"
    number = f"{value:,.0f}" if abs(value) >= 99.95 else f"{value:#.3g}"
    return f"{number} {unit}/s"


RATE_UNITS = ((1, "s"), (60, "min"), (3_600, "h"), (86_400, "day"))
"""Time units a rate may be given per, each with its seconds: the first that makes the rate at least 1 is used."""


def format_rate(per_second: float) -> str:
    """A rate per the first time unit of :data:`RATE_UNITS` that makes it at least 1, as
    :func:`format_per_second` writes numbers: ``"12.0/s"``, ``"2.00/min"``, ``"1,235/s"``, ``"0.0211/day"`` (a
    few calls over all stored time, which read ``"2.44e-07"`` per second); ``"0/s"`` for none, ``"< 0.001/day"``
    below that."""
    if per_second <= 0:
        return "0/s"
    seconds, unit = next(((s, u) for s, u in RATE_UNITS if per_second * s >= 1), RATE_UNITS[-1])
    value = per_second * seconds
    if value < 0.001:
        return f"< 0.001/{unit}"
    return f"{value:,.0f}/{unit}" if value >= 99.95 else f"{value:#.3g}/{unit}"


def format_time_ns(unix_ns: int, *, zone: bool = True) -> str:
    """A Unix time in ns as UTC with milliseconds: ``"2024-10-30 12:24:28.889 UTC"`` (without `` UTC``
    when ``zone`` is False, for columns whose header names the zone)."""
    seconds, rest_ns = divmod(int(unix_ns), 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, tz=UTC)
    text = f"{moment:%Y-%m-%d %H:%M:%S}.{rest_ns // NS_PER_MS:03d}"
    return f"{text} UTC" if zone else text


def attribute_dict(value: object) -> dict[str, str]:
    """An attribute column cell as a plain ``{key: value}`` dict.

    Accepts what polars yields for the reader's attribute columns: a dict (Map or Struct dtype; a
    Struct fills absent keys with None, which are dropped), a list of ``{"key", "value"}`` structs, or
    None.
    """
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        pairs = (item for item in value if isinstance(item, Mapping) and item.get("key") is not None)
        return {str(item["key"]): str(item.get("value", "")) for item in pairs}
    return {}


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``…`` when cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def hover_escape(text: str) -> str:
    """Escape user text for Plotly hover and tick labels, which interpret a subset of HTML."""
    return html.escape(text, quote=False)
