"""Per-span limits that keep one hostile or broken span from costing unbounded memory or storage.

Limits truncate, they never reject: a span over a limit is stored with the excess cut off and a marker
attribute :data:`TRUNCATED_KEY` that says what was cut (the OpenTelemetry SDK's attribute limits behave
the same way, counting ``dropped_attributes_count`` instead of rejecting). The Python conversion
(:mod:`collector.batch`) applies them; the compiled scanner (:mod:`collector.native_writer`) hands every
request that reaches a limit to it, and ``tests/collector/test_native_rows.py`` holds the two to that.
"""

from __future__ import annotations

from dataclasses import dataclass

TRUNCATED_KEY = "hotspan.truncated"
"""Marker attribute on a span that was cut down. Its value lists what was cut, as comma-separated
``what=count`` items in this order, only those above 0: ``attributes`` (span attributes dropped),
``events``, ``links`` (dropped), ``event_attributes``, ``link_attributes`` (dropped, summed over the
span's kept events or links), ``resource_attributes`` (dropped from the span's resource), ``values``
(attribute values shortened, anywhere on the span or its resource). Example: ``attributes=9872,values=1``.
"""


@dataclass(frozen=True)
class SpanLimits:
    """What one span may carry; beyond it the excess is dropped (first ones kept) and marked.

    Attributes:
        max_attributes: attributes kept per span, per event, per link and per resource.
        max_value_chars: characters (Unicode code points) kept per attribute value, after the value is
            stringified as stored; longer values are cut to this length.
        max_events: events kept per span.
        max_links: links kept per span.
    """

    max_attributes: int = 256
    max_value_chars: int = 65_536
    max_events: int = 256
    max_links: int = 128


def truncation_marker(
    *,
    attributes: int = 0,
    events: int = 0,
    links: int = 0,
    event_attributes: int = 0,
    link_attributes: int = 0,
    resource_attributes: int = 0,
    values: int = 0,
) -> str:
    """The :data:`TRUNCATED_KEY` value for the given drop counts; ``""`` when nothing was cut."""
    items = {
        "attributes": attributes,
        "events": events,
        "links": links,
        "event_attributes": event_attributes,
        "link_attributes": link_attributes,
        "resource_attributes": resource_attributes,
        "values": values,
    }
    return ",".join(f"{name}={count}" for name, count in items.items() if count > 0)
