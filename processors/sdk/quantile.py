"""A bounded-memory streaming quantile sketch over a sliding window of recent observations.

Source: C. Masson, J. E. Rim, H. K. Lee, "DDSketch: A Fast and Fully-Mergeable Quantile Sketch with
Relative-Error Guarantees", PVLDB 12(12), 2019 (https://www.vldb.org/pvldb/vol12/p2195-masson.pdf;
project: https://github.com/DataDog/sketches-py).

Values go into logarithmic buckets ``(gamma**(i-1), gamma**i]`` with ``gamma = (1+a)/(1-a)``; any
quantile is then answered with a relative error of at most ``a``. Two choices keep memory bounded
no matter how many values arrive:

* values are clamped to ``[min_value, max_value]`` before bucketing, so a window holds at most
  :attr:`WindowedQuantileSketch.max_buckets` buckets (DDSketch collapses its lowest buckets instead;
  clamping is simpler and loses nothing at the high quantiles a hotspot detector asks for);
* the window is two halves: when the current half has seen ``window // 2`` values it replaces the
  previous half, so the sketch answers over the last ``window // 2`` to ``window`` values and a change
  in latency shows up within ``window // 2`` observations.
"""

import bisect
import itertools
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from operator import add
from typing import Final

DEFAULT_RELATIVE_ACCURACY: Final = 0.02
DEFAULT_MIN_VALUE: Final = 1e-3
"""In milliseconds, 1 µs: the SDK's clock resolution is finer, but no span duration matters below it."""
DEFAULT_MAX_VALUE: Final = 1e7
"""In milliseconds, about 2.8 hours: longer spans all count as this long."""


class WindowedQuantileSketch:
    """Log-bucketed histogram of the most recent ``window // 2`` .. ``window`` values.

    Units are the caller's (Hotspan passes milliseconds). Memory: two dicts of at most
    :attr:`max_buckets` ``int -> int`` entries each, independent of how many values were added.
    Cost: :meth:`add_many` is O(n) in C-level iterators (about 0.1 µs per value, against 0.2 µs for a
    call of :meth:`add`); :meth:`quantile` is O(b log b) for b occupied buckets.

    Not thread-safe: callers serialise access (``HotspotSpanProcessor`` holds a lock per key stripe).
    """

    __slots__ = (
        "_current",
        "_current_count",
        "_gamma",
        "_half_window",
        "_max_index",
        "_max_value",
        "_min_index",
        "_min_value",
        "_previous",
        "_previous_count",
    )

    def __init__(
        self,
        window: int = 2048,
        relative_accuracy: float = DEFAULT_RELATIVE_ACCURACY,
        min_value: float = DEFAULT_MIN_VALUE,
        max_value: float = DEFAULT_MAX_VALUE,
    ) -> None:
        """Create an empty sketch.

        Args:
            window: Values remembered, at most; at least ``window // 2`` after the first rotation. >= 2.
            relative_accuracy: ``a`` in (0, 1): quantiles are within a factor ``1 +- a`` of a true
                value of the window.
            min_value: Values at or below this count as ``min_value`` (> 0; log buckets need it).
            max_value: Values at or above this count as ``max_value``.

        Raises:
            ValueError: A parameter is out of range.
        """
        if window < 2:
            raise ValueError(f"window must be >= 2, got {window!r}")
        if not 0.0 < relative_accuracy < 1.0:
            raise ValueError(f"relative_accuracy must be in (0, 1), got {relative_accuracy!r}")
        if not 0.0 < min_value < max_value:
            raise ValueError(f"need 0 < min_value < max_value, got {min_value!r}, {max_value!r}")
        self._gamma = (1.0 + relative_accuracy) / (1.0 - relative_accuracy)
        self._min_value = min_value
        self._max_value = max_value
        self._min_index = self._index(min_value)
        self._max_index = self._index(max_value)
        self._half_window = window // 2
        self._current: Counter[int] = Counter()
        self._previous: Counter[int] = Counter()
        self._current_count = 0
        self._previous_count = 0

    def _index(self, value: float) -> int:
        return math.ceil(math.log(value, self._gamma))

    @property
    def max_buckets(self) -> int:
        """Upper bound on occupied buckets per half window, fixed by accuracy and value range."""
        return self._max_index - self._min_index + 1

    @property
    def count(self) -> int:
        """Values in the window now."""
        return self._current_count + self._previous_count

    @property
    def bucket_count(self) -> int:
        """Occupied buckets across both halves (the sketch's memory, in dict entries)."""
        return len(self._current) + len(self._previous)

    def add(self, value: float) -> None:
        """Record one value (same unit as ``min_value``/``max_value``).

        Raises:
            ValueError: ``value`` is NaN (it has no bucket).
        """
        self.add_many((value,))

    def add_many(self, values: Sequence[float]) -> None:
        """Record values in order, exactly as that many :meth:`add` calls would.

        Raises:
            ValueError: A value is NaN; the values before it in its half window may be recorded.
        """
        start = 0
        while start < len(values):
            chunk = values[start : start + self._half_window - self._current_count]
            self._current.update(self._indexes(chunk))
            self._current_count += len(chunk)
            start += len(chunk)
            if self._current_count >= self._half_window:
                self._previous = self._current
                self._previous_count = self._current_count
                self._current = Counter()
                self._current_count = 0

    def _indexes(self, values: Sequence[float]) -> Iterator[int]:
        # Bucket index ceil(log_gamma(v)) of each value, composed from C-implemented iterators so no
        # Python frame runs per value; clamping to the range (two more calls per value) only when a
        # value lies outside it.
        low, high = self._min_value, self._max_value
        if low < min(values) and max(values) < high:
            inside: Iterable[float] = values
        else:
            inside = map(min, map(max, values, repeat(low)), repeat(high))
        return map(math.ceil, map(math.log, inside, repeat(self._gamma)))

    def quantile(self, q: float) -> float | None:
        """Estimate the ``q`` quantile of the window, or ``None`` when it is empty.

        Uses the lower rank ``floor(q * (n - 1))`` like DDSketch; the answer is
        ``2 * gamma**i / (gamma + 1)`` for the bucket ``i`` holding that rank, within a factor
        ``1 +- relative_accuracy`` of every value in the bucket, clamped to the value range.

        Raises:
            ValueError: ``q`` is not in [0, 1].
        """
        index = self._rank_bucket(q)
        if index is None:
            return None
        return self._clamp(2.0 * self._gamma**index / (self._gamma + 1.0))

    def upper_bound(self, q: float) -> float | None:
        """Upper edge ``gamma**i`` of the bucket holding the ``q`` quantile, or ``None`` when empty.

        A value greater than this lies in a higher bucket than the quantile, so it is above the
        quantile for certain, never a bucket-mate of it; a threshold detector compares with this
        (equal durations are then never "above their own p95"). At most ``1 + 2a/(1-a)`` times the
        :meth:`quantile` estimate.

        Raises:
            ValueError: ``q`` is not in [0, 1].
        """
        index = self._rank_bucket(q)
        return None if index is None else self._clamp(self._gamma**index)

    def _rank_bucket(self, q: float) -> int | None:
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"q must be in [0, 1], got {q!r}")
        total = self._current_count + self._previous_count
        if total == 0:
            return None
        previous, current = self._previous, self._current
        # Descending cumulative counts: the answer is the first bucket holding more values than the
        # number that lie strictly above the target rank. Built from C-level iterators: this runs
        # once per ``refresh_every`` spans of a key.
        ordered = sorted(previous.keys() | current.keys(), reverse=True)
        counts = map(add, map(previous.get, ordered, repeat(0)), map(current.get, ordered, repeat(0)))
        cumulative = list(itertools.accumulate(counts))
        above = total - 1 - math.floor(q * (total - 1))
        return ordered[bisect.bisect_right(cumulative, above)]

    def _clamp(self, value: float) -> float:
        return min(max(value, self._min_value), self._max_value)
