"""Trace ID spellings shown to people: a 64-bit ID (Zipkin, Jaeger) without the zero padding it is stored with."""

from __future__ import annotations

import pytest

from storage.ids import normalize_trace_id, short_trace_id, shown_trace_id

SIXTY_FOUR_BIT = normalize_trace_id("1234abcd5678ef90")
"""A Zipkin or Jaeger 64-bit trace ID as stored: 16 zeros, then its digits."""


def test_a_64_bit_id_is_shown_without_its_padding() -> None:
    assert SIXTY_FOUR_BIT == "0" * 16 + "1234abcd5678ef90"
    assert shown_trace_id(SIXTY_FOUR_BIT) == "1234abcd5678ef90"
    assert short_trace_id(SIXTY_FOUR_BIT) == "1234abcd"
    assert short_trace_id(SIXTY_FOUR_BIT, 16) == "1234abcd5678ef90"


@pytest.mark.parametrize(
    "trace_id",
    [
        "43e16db8b39d2847d082975ab07acfa6",
        # Leading zeros of a 128-bit ID are digits, not padding: only a whole zero upper half is dropped.
        "00000000000000010000000000000002",
        "000000000000000f" + "0" * 15 + "1",
    ],
)
def test_a_128_bit_id_is_shown_whole_and_shortened_from_its_start(trace_id: str) -> None:
    assert shown_trace_id(trace_id) == trace_id
    assert short_trace_id(trace_id) == trace_id[:8]
