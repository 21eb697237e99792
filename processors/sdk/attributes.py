"""Attribute and instrument names that Hotspan's SDK components write.

Hotspan's collector, query API and UI search for these exact keys, so they live in one place.
"""

from typing import Final

HOTSPOT: Final = "hotspan.hotspot"
"""bool, always ``True`` where present: the span took longer than its threshold."""

HOTSPOT_REASON: Final = "hotspan.hotspot.reason"
"""str, which threshold the span crossed: ``"static"`` (a configured rule) or ``"p95"`` (adaptive)."""

HOTSPOT_THRESHOLD_MS: Final = "hotspan.hotspot.threshold_ms"
"""float, milliseconds: the threshold the span's duration was compared with."""

HOTSPOT_DURATION_MS: Final = "hotspan.hotspot.duration_ms"
"""float, milliseconds: the span's duration (end - start)."""

REASON_STATIC: Final = "static"
REASON_P95: Final = "p95"

HOTSPOT_SPANS_METRIC: Final = "hotspan.hotspot.spans"
"""Counter name (unit ``{span}``): flagged spans, by ``service.name`` and ``span.name``."""

METRIC_SERVICE_NAME: Final = "service.name"
METRIC_SPAN_NAME: Final = "span.name"

SAMPLING_POLICY: Final = "hotspan.sampling.policy"
"""str, name of the sampling policy that matched the span's baggage (absent when none matched)."""

SAMPLING_CHANNEL: Final = "hotspan.sampling.channel"
"""str, channel of that policy (e.g. ``"gray"``), or the config's ``default_channel``."""
