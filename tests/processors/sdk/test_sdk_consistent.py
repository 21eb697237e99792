"""Consistent probability sampling helpers against the OTel spec "TraceState: Probability Sampling"."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.trace import TraceState

from hotspan_sdk import consistent

# The spec's table of 1-in-N probabilities at the recommended precision of 4 hex digits.
SPEC_THRESHOLDS = [
    (1.0, "0"),
    (0.5, "8"),
    (1 / 3, "aaab"),
    (0.25, "c"),
    (0.2, "cccd"),
    (0.125, "e"),
    (0.1, "e666"),
    (0.0625, "f"),
    (0.01, "fd70a"),
    (0.001, "ffbe77"),
    (0.0001, "fff9724"),
    (0.00001, "ffff583a"),
    (0.000001, "ffffef39"),
]


@pytest.mark.parametrize(("probability", "th"), SPEC_THRESHOLDS)
def test_thresholds_match_the_spec_table(probability: float, th: str) -> None:
    threshold = consistent.threshold_for_probability(probability)
    assert consistent.encode_threshold(threshold) == th
    assert consistent.decode_threshold(th) == threshold


@pytest.mark.parametrize("probability", [0.0, -0.1, 1.1, float("nan"), 2.0**-57])
def test_probability_out_of_range_raises(probability: float) -> None:
    with pytest.raises(ValueError):
        consistent.threshold_for_probability(probability)


def test_precision_out_of_range_raises() -> None:
    with pytest.raises(ValueError):
        consistent.threshold_for_probability(0.5, precision=0)


@given(st.floats(min_value=2.0**-40, max_value=1.0))
def test_threshold_keeps_probability_to_four_significant_digits(probability: float) -> None:
    kept = consistent.probability_of(consistent.threshold_for_probability(probability))
    assert kept == pytest.approx(probability, rel=16**-3)


@pytest.mark.parametrize("text", ["", "g", "8" * 15, "A", " 8"])
def test_invalid_th_is_rejected(text: str) -> None:
    assert consistent.decode_threshold(text) is None


def test_randomness_is_the_trace_ids_low_56_bits() -> None:
    trace_id = 0x0123456789ABCDEF_FEDCBA9876543210
    assert consistent.randomness_of(trace_id, {}) == 0xDCBA9876543210


def test_rv_overrides_trace_id_randomness() -> None:
    state = TraceState([("ot", "th:8;rv:00000000000001")])
    fields = consistent.ot_fields(state)
    assert consistent.randomness_of(0xFFFFFFFFFFFFFFFF, fields) == 1


@pytest.mark.parametrize("rv", ["1", "0000000000000g", "000000000000001"])
def test_invalid_rv_falls_back_to_trace_id(rv: str) -> None:
    assert consistent.randomness_of(0xABC, {"rv": rv}) == 0xABC


def test_ot_fields_parses_members_and_skips_garbage() -> None:
    state = TraceState([("ot", "th:c;rv:0123456789abcd;junk;x:1"), ("vendor", "v")])
    assert consistent.ot_fields(state) == {"th": "c", "rv": "0123456789abcd", "x": "1"}
    assert consistent.ot_fields(None) == {}
    assert consistent.ot_fields(TraceState([("vendor", "v")])) == {}


def test_with_threshold_sets_th_first_and_keeps_rv_and_other_vendors() -> None:
    state = TraceState([("vendor", "v"), ("ot", "rv:0123456789abcd;x:1")])
    updated = consistent.with_threshold(state, consistent.threshold_for_probability(0.25))
    assert updated["ot"] == "th:c;rv:0123456789abcd;x:1"
    assert updated["vendor"] == "v"
    assert next(iter(updated)) == "ot"  # W3C: a modified entry moves to the front


def test_with_threshold_on_empty_state_adds_ot() -> None:
    assert consistent.with_threshold(None, 0).to_header() == "ot=th:0"


def test_with_threshold_none_erases_th_and_empty_ot() -> None:
    assert consistent.with_threshold(TraceState([("ot", "th:8;rv:0123456789abcd")]), None)["ot"] == (
        "rv:0123456789abcd"
    )
    erased = consistent.with_threshold(TraceState([("ot", "th:8"), ("vendor", "v")]), None)
    assert "ot" not in erased
    assert erased["vendor"] == "v"


def test_with_threshold_returns_same_object_when_unchanged() -> None:
    state = TraceState([("ot", "th:8")])
    assert consistent.with_threshold(state, 1 << 55) is state
    plain = TraceState([("vendor", "v")])
    assert consistent.with_threshold(plain, None) is plain


@given(
    randomness=st.integers(min_value=0, max_value=consistent.RANDOMNESS_MASK),
    p1=st.floats(min_value=2.0**-56, max_value=1.0),
    p2=st.floats(min_value=2.0**-56, max_value=1.0),
)
def test_decisions_are_consistent_across_probabilities(randomness: int, p1: float, p2: float) -> None:
    """Spec: a keep at probability p1 implies a keep at any p2 >= p1 for the same randomness."""
    low, high = sorted((p1, p2))
    keep_low = randomness >= consistent.threshold_for_probability(low)
    keep_high = randomness >= consistent.threshold_for_probability(high)
    assert not keep_low or keep_high
