"""WindowedQuantileSketch: relative accuracy, the sliding window, and bounded memory."""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotspan_sdk.quantile import WindowedQuantileSketch


def exact_quantile(values: list[float], q: float) -> float:
    """The lower-rank quantile the sketch approximates: sorted(values)[floor(q * (n - 1))]."""
    ordered = sorted(values)
    return ordered[math.floor(q * (len(ordered) - 1))]


@pytest.mark.parametrize("q", [0.5, 0.9, 0.95, 0.99])
def test_quantile_within_relative_accuracy_of_exact(q: float) -> None:
    rng = random.Random(7)
    values = [rng.lognormvariate(3.0, 0.8) for _ in range(1000)]
    sketch = WindowedQuantileSketch(window=2048, relative_accuracy=0.02)
    for value in values:
        sketch.add(value)
    estimate = sketch.quantile(q)
    assert estimate is not None
    assert estimate == pytest.approx(exact_quantile(values, q), rel=0.02)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(min_value=0.01, max_value=1e6), min_size=1, max_size=300),
    q=st.floats(min_value=0.0, max_value=1.0),
)
def test_any_input_quantile_is_relatively_accurate(values: list[float], q: float) -> None:
    sketch = WindowedQuantileSketch(window=1024, relative_accuracy=0.01)
    for value in values:
        sketch.add(value)
    exact = exact_quantile(values, q)
    estimate = sketch.quantile(q)
    upper = sketch.upper_bound(q)
    assert estimate is not None and upper is not None
    assert abs(estimate - exact) <= 0.01 * exact * (1 + 1e-9)
    # The bucket's upper edge is at or above every value in the quantile's bucket.
    assert exact <= upper * (1 + 1e-12)
    assert upper <= estimate * (1.01 / 0.99) * (1 + 1e-12)


def test_window_forgets_old_values() -> None:
    sketch = WindowedQuantileSketch(window=200)
    for _ in range(200):
        sketch.add(1000.0)
    for _ in range(200):
        sketch.add(10.0)
    assert sketch.count <= 200
    assert sketch.quantile(0.99) == pytest.approx(10.0, rel=0.02)


def test_window_keeps_at_least_half() -> None:
    sketch = WindowedQuantileSketch(window=100)
    for value in range(1, 1001):
        sketch.add(float(value))
    assert 50 <= sketch.count <= 100


def test_empty_sketch_has_no_quantile() -> None:
    sketch = WindowedQuantileSketch()
    assert sketch.quantile(0.95) is None
    assert sketch.upper_bound(0.95) is None
    assert sketch.count == 0


def test_values_outside_the_range_are_clamped() -> None:
    sketch = WindowedQuantileSketch(min_value=1.0, max_value=100.0)
    for value in (0.0, -5.0, 1e-300, 1e300, math.inf):
        sketch.add(value)
    assert sketch.quantile(0.0) == pytest.approx(1.0, rel=0.03)
    assert sketch.quantile(1.0) == pytest.approx(100.0, rel=0.03)


@pytest.mark.parametrize(
    "kwargs",
    [{"window": 1}, {"relative_accuracy": 0.0}, {"relative_accuracy": 1.0}, {"min_value": 0.0}, {"max_value": 1e-4}],
)
def test_invalid_parameters_raise(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        WindowedQuantileSketch(**kwargs)  # type: ignore[arg-type]


def test_invalid_quantile_raises() -> None:
    with pytest.raises(ValueError, match="q must be in"):
        WindowedQuantileSketch().quantile(1.5)


def test_memory_bounded_after_one_million_values() -> None:
    sketch = WindowedQuantileSketch(window=2048, relative_accuracy=0.02)
    rng = random.Random(11)
    # Half a million from a steady workload, then half a million spread over fifteen decades
    # (adversarial: every bucket of the range gets used).
    steady_peak = 0
    for _ in range(500_000):
        sketch.add(rng.lognormvariate(2.0, 0.5))
        steady_peak = max(steady_peak, sketch.bucket_count)
    peak = steady_peak
    for _ in range(500_000):
        sketch.add(10 ** rng.uniform(-6, 9))
        peak = max(peak, sketch.bucket_count)
    assert sketch.count <= 2048
    assert peak <= 2 * sketch.max_buckets
    assert sketch.max_buckets <= 600  # 2% accuracy over [1e-3, 1e7] ms
    assert steady_peak <= 200  # a real latency distribution uses a small part of that bound


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(min_value=0.0, max_value=1e9, allow_nan=False), max_size=700),
    chunk=st.integers(min_value=1, max_value=300),
)
def test_adding_in_chunks_equals_adding_one_by_one(values: list[float], chunk: int) -> None:
    """add_many (the hotspot processor's path, chunks crossing window rotations, values outside the
    range included) leaves the sketch exactly as the same values added one at a time."""
    one_by_one = WindowedQuantileSketch(window=256)
    chunked = WindowedQuantileSketch(window=256)
    for value in values:
        one_by_one.add(value)
    for start in range(0, len(values), chunk):
        chunked.add_many(values[start : start + chunk])
    assert chunked.count == one_by_one.count
    assert chunked.bucket_count == one_by_one.bucket_count
    for q in (0.0, 0.5, 0.95, 1.0):
        assert chunked.upper_bound(q) == one_by_one.upper_bound(q)


def test_nan_has_no_bucket() -> None:
    with pytest.raises(ValueError):
        WindowedQuantileSketch().add(math.nan)
