"""Consistent probability sampling: thresholds, randomness and the ``ot`` tracestate entry.

Source: OpenTelemetry specification, "TraceState: Probability Sampling" and "TraceState Handling"
(https://opentelemetry.io/docs/specs/otel/trace/tracestate-probability-sampling/, OTEP 235).

Every participant compares the same 56-bit randomness ``R`` with its own rejection threshold ``T`` and
keeps the span iff ``R >= T``. ``R`` is the ``rv`` sub-key of the ``ot`` tracestate entry when present,
else the least-significant 56 bits of the trace ID (W3C Trace Context Level 2). ``T`` is
``(1 - probability) * 2**56``. Because ``R`` is shared, a trace kept at probability ``p1`` is kept by
every participant with probability ``p2 >= p1``: services with the same ratio never split a trace.
A sampled span records its ``T`` as ``ot=th:<hex>`` (trailing zeros removed) so consumers can
compute adjusted counts; an unsampled span carries no ``th``.

All functions are pure and thread-safe.
"""

import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Final

from opentelemetry.trace import TraceState

RANDOMNESS_BITS: Final = 56
MAX_THRESHOLD: Final = 1 << RANDOMNESS_BITS
"""Exclusive upper bound of thresholds; ``T = MAX_THRESHOLD`` would mean "never", which is not
probability sampling and has no ``th`` encoding."""
RANDOMNESS_MASK: Final = MAX_THRESHOLD - 1
HEX_DIGITS: Final = RANDOMNESS_BITS // 4
DEFAULT_PRECISION: Final = 4
"""Hex digits of threshold precision; the spec recommends 4 for SDKs."""
MIN_PROBABILITY: Final = 2.0**-RANDOMNESS_BITS

OT_KEY: Final = "ot"
THRESHOLD_KEY: Final = "th"
RANDOMNESS_KEY: Final = "rv"

_THRESHOLD_RE = re.compile(r"[0-9a-f]{1,14}")
_RANDOMNESS_RE = re.compile(r"[0-9a-f]{14}")
# The float algorithm in the spec keeps at most 12 digits; capping the same way keeps our thresholds
# identical to other SDKs' for the same probability.
_MAX_PRECISION = 12


def threshold_for_probability(probability: float, precision: int = DEFAULT_PRECISION) -> int:
    """Rejection threshold for a sampling probability, rounded to ``precision`` significant hex digits.

    Precision grows by one digit per leading ``f`` (via the probability's base-2 exponent, as the spec
    does) so small probabilities keep ``precision`` meaningful digits: 0.01 -> ``fd70a``.

    Args:
        probability: Keep probability in [2**-56, 1].
        precision: Significant hex digits, 1..12.

    Returns:
        ``T`` in [0, 2**56 - 1]; ``0`` means "keep everything".

    Raises:
        ValueError: ``probability`` or ``precision`` out of range.
    """
    if not MIN_PROBABILITY <= probability <= 1.0:
        raise ValueError(f"probability must be in [2**-56, 1], got {probability!r}")
    if not 1 <= precision <= _MAX_PRECISION:
        raise ValueError(f"precision must be in [1, {_MAX_PRECISION}], got {precision!r}")
    if probability == 1.0:
        return 0
    _, exponent = math.frexp(probability)
    digits = max(1, min(_MAX_PRECISION, precision + exponent // -4))
    unit = 16 ** (HEX_DIGITS - digits)
    # Exact rational arithmetic: the rounding is decided on the true value, not a float's.
    exact = (1 - Fraction(probability)) * MAX_THRESHOLD / unit
    return min(math.floor(exact + Fraction(1, 2)) * unit, RANDOMNESS_MASK)


def probability_of(threshold: int) -> float:
    """Keep probability that a threshold stands for: ``(2**56 - T) / 2**56``."""
    return (MAX_THRESHOLD - threshold) / MAX_THRESHOLD


def encode_threshold(threshold: int) -> str:
    """``th`` value: 14 hex digits with trailing zeros removed; ``0`` encodes as ``"0"``."""
    return f"{threshold:014x}".rstrip("0") or "0"


def decode_threshold(text: str) -> int | None:
    """Parse a ``th`` value (1-14 lowercase hex digits, right-padded with zeros); ``None`` if invalid."""
    if _THRESHOLD_RE.fullmatch(text) is None:
        return None
    return int(text.ljust(HEX_DIGITS, "0"), 16)


def decode_randomness(text: str) -> int | None:
    """Parse an ``rv`` value (exactly 14 lowercase hex digits); ``None`` if invalid."""
    if _RANDOMNESS_RE.fullmatch(text) is None:
        return None
    return int(text, 16)


def ot_fields(trace_state: TraceState | None) -> dict[str, str]:
    """Sub-keys of the ``ot`` tracestate entry (``"th:8;rv:..."`` -> ``{"th": "8", "rv": ...}``).

    Malformed members (no ``:``) are skipped; an absent entry gives ``{}``.
    """
    if trace_state is None:
        return {}
    value = trace_state.get(OT_KEY)
    if not value:
        return {}
    fields: dict[str, str] = {}
    for member in value.split(";"):
        key, sep, sub_value = member.partition(":")
        if sep and key:
            fields.setdefault(key, sub_value)
    return fields


def randomness_of(trace_id: int, fields: Mapping[str, str]) -> int:
    """``R``: the valid ``rv`` sub-key if present, else the trace ID's low 56 bits."""
    explicit = fields.get(RANDOMNESS_KEY)
    if explicit is not None:
        value = decode_randomness(explicit)
        if value is not None:
            return value
    return trace_id & RANDOMNESS_MASK


def threshold_of(fields: Mapping[str, str]) -> int | None:
    """``T`` from the ``th`` sub-key, ``None`` when absent or malformed."""
    text = fields.get(THRESHOLD_KEY)
    return None if text is None else decode_threshold(text)


def with_threshold(trace_state: TraceState | None, threshold: int | None) -> TraceState:
    """Return ``trace_state`` with ``ot``'s ``th`` set to ``threshold``, or erased when ``None``.

    Other ``ot`` sub-keys (``rv`` must be kept verbatim) and other vendors' entries are preserved; a
    changed ``ot`` entry moves to the front, as W3C Trace Context asks of modified entries. Returns the
    same object when nothing changes, so the common case allocates nothing.
    """
    state = trace_state if trace_state is not None else TraceState()
    fields = ot_fields(state)
    wanted = None if threshold is None else encode_threshold(threshold)
    if fields.get(THRESHOLD_KEY) == wanted:
        return state
    members = [f"{key}:{value}" for key, value in fields.items() if key != THRESHOLD_KEY]
    if wanted is not None:
        members.insert(0, f"{THRESHOLD_KEY}:{wanted}")
    if not members:
        return state.delete(OT_KEY)
    return state.update(OT_KEY, ";".join(members))
