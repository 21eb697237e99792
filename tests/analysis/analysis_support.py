"""Hand-built span frames for the analysis tests, in the reader's shape (attributes as a Map).

Times in these tests are small integers of ns from an arbitrary origin, so the worked answers in the test
comments read as plain numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import polars as pl
from hypothesis import strategies as st

from analysis.spans import ATTRIBUTES

T0 = 1_700_000_000_000_000_000
"""Origin added to every hand-written time, so frames carry realistic epoch nanoseconds."""
FOLLOWS = {"opentracing.ref_type": "follows_from"}
"""Link attributes that make the linked parent a FOLLOWS_FROM parent (Jaeger -> OTLP)."""


@dataclass(frozen=True)
class S:
    """One hand-written span: ``start``/``end`` in ns after :data:`T0`."""

    span_id: str
    parent: str
    start: int
    end: int
    name: str = ""
    service: str = "svc"
    kind: str = "Internal"
    attributes: Mapping[str, str] = field(default_factory=dict)
    links: tuple[tuple[str, Mapping[str, str]], ...] = ()
    trace_id: str = "t1"
    resource: Mapping[str, str] = field(default_factory=dict)


def frame(spans: Iterable[S]) -> pl.DataFrame:
    """A span frame with the contract's columns (and link columns) for ``spans``."""
    rows = list(spans)
    return pl.DataFrame(
        {
            "trace_id": [s.trace_id for s in rows],
            "span_id": [s.span_id for s in rows],
            "parent_span_id": [s.parent for s in rows],
            "name": [s.name or s.span_id for s in rows],
            "service_name": [s.service for s in rows],
            "kind": [s.kind for s in rows],
            "start_time_unix_nano": [T0 + s.start for s in rows],
            "end_time_unix_nano": [T0 + s.end for s in rows],
            "attributes": pl.Series([dict(s.attributes) for s in rows], dtype=ATTRIBUTES),
            "resource_attributes": pl.Series([dict(s.resource) for s in rows], dtype=ATTRIBUTES),
            "link_trace_ids": [[s.trace_id for _ in s.links] for s in rows],
            "link_span_ids": [[span for span, _ in s.links] for s in rows],
            "link_attributes": pl.Series(
                [[dict(attributes) for _, attributes in s.links] for s in rows], dtype=pl.List(ATTRIBUTES)
            ),
        },
        schema_overrides={"start_time_unix_nano": pl.Int64, "end_time_unix_nano": pl.Int64},
    )


def by_span(result: pl.DataFrame, column: str) -> dict[str, object]:
    """``{span_id: value}`` of one column of a per-span result."""
    return dict(zip(result["span_id"].to_list(), result[column].to_list(), strict=True))


def sections_by_span(result: pl.DataFrame) -> dict[str, list[tuple[int, int]]]:
    """Critical-path sections per span, as ``(start, end)`` relative to :data:`T0`, in time order."""
    found: dict[str, list[tuple[int, int]]] = {}
    for row in result.sort("start_ns").iter_rows(named=True):
        found.setdefault(row["span_id"], []).append((row["start_ns"] - T0, row["end_ns"] - T0))
    return found


@st.composite
def random_traces(draw: st.DrawFn) -> list[S]:
    """Random single-root traces of up to 14 spans: children may overflow or lie outside their parent, have
    zero duration, share ends, or be FOLLOWS_FROM children (one in ten). The first span is the root."""
    count = draw(st.integers(1, 14))
    spans = [S("s0", "", 0, draw(st.integers(0, 40)))]
    for i in range(1, count):
        parent = spans[draw(st.integers(0, i - 1))]
        start = draw(st.integers(parent.start - 5, parent.end + 3))
        end = start + draw(st.integers(0, 25))
        follows = draw(st.integers(0, 9)) == 0
        spans.append(S(f"s{i}", parent.span_id, start, end, links=(((parent.span_id, FOLLOWS),) if follows else ())))
    return spans
