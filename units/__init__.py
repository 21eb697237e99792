"""Time units, in one place: every Hotspan module converts with these (``hotspan_sdk`` excepted, which
imports nothing of Hotspan because it runs in users' services).

Hotspan stores and computes in integer **nanoseconds** since the Unix epoch; APIs name any other unit in the
field (``_ms``, ``_s``). :mod:`units.durations` parses duration strings (Go's ``time.ParseDuration`` grammar, as
Jaeger's query APIs and Prometheus windows write them).
"""

from __future__ import annotations

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
NS_PER_MIN = 60 * NS_PER_S
NS_PER_H = 60 * NS_PER_MIN
NS_PER_DAY = 24 * NS_PER_H
