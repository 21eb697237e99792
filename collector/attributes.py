"""OTLP ``AnyValue`` → the string the ClickHouse exporter stores in its attribute maps.

The exporter keeps every attribute as a string (pdata ``Value.AsString``): strings as is, booleans
``true``/``false``, integers in decimal, doubles in Go's shortest ``%g`` form, bytes as standard
base64, arrays and key-value lists as JSON. Following it keeps Hotspan's rows identical to what an
OTel Collector would have written for the same span.
"""

from __future__ import annotations

import base64
import json
import math
from decimal import Decimal
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def value_to_string(value: AnyValue) -> str:
    """Stringify one attribute value as the exporter does (see module docstring)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind is None:
        return ""
    raw = _raw(value)
    if isinstance(raw, list | dict):
        return json.dumps(raw, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, float):
        return go_float(raw)
    return str(raw)


def go_float(number: float) -> str:
    """Format like Go's ``strconv.FormatFloat(f, 'g', -1, 64)``: shortest digits, exponent form
    when the decimal exponent is below -4 or at least 21 (Go's shortest-%g switch point).
    """
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    if number == 0:
        return "-0" if math.copysign(1.0, number) < 0 else "0"
    sign, digits, exponent = Decimal(repr(number)).normalize().as_tuple()
    text = "".join(map(str, digits))
    point = len(text) + int(exponent)
    decimal_exponent = point - 1
    prefix = "-" if sign else ""
    if decimal_exponent < -4 or decimal_exponent >= 21:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if decimal_exponent < 0 else '+'}{abs(decimal_exponent):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{text}"
    if point >= len(text):
        return prefix + text + "0" * (point - len(text))
    return f"{prefix}{text[:point]}.{text[point:]}"


def _raw(value: AnyValue) -> Any:
    """The JSON-ready Python value of an AnyValue (pdata ``AsRaw``); doubles stay floats."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_raw(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _raw(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    if kind == "double_value":
        number = value.double_value
        return number if math.isfinite(number) else go_float(number)
    if kind is None:
        return None
    return getattr(value, kind)
