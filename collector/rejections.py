"""Per-span rejection records shared by the decoders and the ingest path."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rejection:
    """One span that was not stored.

    Attributes:
        path: where the span sits in the request, e.g. ``resourceSpans[0].scopeSpans[1].spans[4]``.
        reason: the field, the value and the rule it broke.
    """

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class SpanError(ValueError):
    """Raised inside a decoder for a span that is invalid on its own; the span is skipped."""


def summarize(rejections: list[Rejection], limit: int = 5) -> str:
    """A one-line ``error_message`` for OTLP ``partial_success``: the first ``limit`` reasons."""
    if not rejections:
        return ""
    head = "; ".join(str(r) for r in rejections[:limit])
    more = len(rejections) - limit
    return f"{len(rejections)} span(s) rejected: {head}" + (f"; and {more} more" if more > 0 else "")
