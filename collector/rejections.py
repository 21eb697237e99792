"""Per-span rejection records shared by the decoders and the ingest path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Position = tuple[int, int, int]
"""Where a span sits in a request: ``(resource_spans index, scope_spans index, spans index)``, 0-based."""


def span_path(position: Position) -> str:
    """The OTLP/JSON field path of a span, e.g. ``resourceSpans[0].scopeSpans[1].spans[4]``."""
    r_index, s_index, p_index = position
    return f"resourceSpans[{r_index}].scopeSpans[{s_index}].spans[{p_index}]"


@dataclass(frozen=True)
class Rejection:
    """One span that was not stored.

    Attributes:
        path: where the span sits in the request, e.g. ``resourceSpans[0].scopeSpans[1].spans[4]``.
        reason: the field, the value and the rule it broke.
        position: the same place as indexes, when known; a decoder that leaves an unreadable span
            in place (as an empty placeholder) sets it so later stages skip that span.
    """

    path: str
    reason: str
    position: Position | None = None

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"

    @classmethod
    def at(cls, position: Position, reason: str) -> Rejection:
        """A rejection of the span at ``position``."""
        return cls(span_path(position), reason, position)


class SpanError(ValueError):
    """Raised inside a decoder for a span that is invalid on its own; the span is skipped."""


def summarize(rejections: Sequence[Rejection], limit: int = 5) -> str:
    """A one-line ``error_message`` for OTLP ``partial_success``: the first ``limit`` reasons."""
    if not rejections:
        return ""
    head = "; ".join(str(r) for r in rejections[:limit])
    more = len(rejections) - limit
    return f"{len(rejections)} span(s) rejected: {head}" + (f"; and {more} more" if more > 0 else "")


def duplicate_warning(copies: int, first: Position, kept: Position) -> str:
    """The one note for ``copies`` (≥ 1) earlier copies of spans sent again later in their request (same
    ``(traceId, spanId, kind, name, startTimeUnixNano)``), naming the first and the copy kept for it. A note, not a
    rejection: the span is stored, once, as its last copy, as when it is sent again in a later request. OTLP reads
    ``rejected_spans`` as spans not accepted, and exporters report them as lost."""
    return (
        f"{copies} span(s) sent again later in this request (same traceId, spanId, kind, name and start) are stored "
        f"once, as their last copy: {span_path(first)} as {span_path(kept)}"
    )
