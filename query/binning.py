"""Intervals spread over equal time bins: how much of each bin every category covers.

Used where a trace has more intervals than pixels to draw them on: the stage lane of a zoom window (category:
stage) and the density of an aggregate row (one category: its members).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from analysis.ancestry import IntArray


def bin_coverage(
    category: IntArray, start: IntArray, end: IntArray, categories: int, low: int, high: int, bins: int
) -> npt.NDArray[np.float64]:
    """Per category and bin of ``[low, high)`` cut into ``bins`` equal bins, the time (in bins: 1.0 is a whole
    bin) that the intervals ``[start, end)`` (ns, aligned with ``category`` in ``range(categories)``) cover,
    overlaps counted once per interval. Shape ``(categories, bins)``.

    The time covered before bin edge ``k`` is ``F(k) = sum over intervals of max(0, k - s) - max(0, k - e)``
    (bin units), and ``sum over s < k of (k - s)`` is ``k * #(s < k) - sum(s < k)``: two cumulative histograms
    per bound, so an interval spanning many bins costs as little as a short one.
    """
    width = max(high - low, 1) / bins
    edges = np.arange(bins + 1, dtype=np.float64)
    covered = np.zeros((categories, bins + 1))
    columns = bins + 2
    for bound, sign in (((start - low) / width, 1.0), ((end - low) / width, -1.0)):
        bound = np.clip(bound, 0, bins)
        first_edge = np.floor(bound).astype(np.int64) + 1
        key = category * columns + first_edge
        count = np.bincount(key, minlength=categories * columns).reshape(categories, columns)
        total = np.bincount(key, weights=bound, minlength=categories * columns).reshape(categories, columns)
        below_count = np.cumsum(count, axis=1)[:, : bins + 1]
        below_total = np.cumsum(total, axis=1)[:, : bins + 1]
        covered += sign * (edges * below_count - below_total)
    return np.diff(covered, axis=1)
