"""The Pareto frontier of points scored by two objectives, one to maximise and one to minimise (the
throughput-latency view: throughput up, latency down).

Definition (Pareto dominance, e.g. K. Deb, *Multi-Objective Optimization using Evolutionary Algorithms*, Wiley
2001, section 2.4): point *a* dominates point *b* when *a* is no worse in both objectives and strictly better in
at least one; the frontier is the set of points no other point dominates. Two equal points do not dominate each
other, so both stay on it.

Computed by sorting on the first objective and sweeping with the running best of the second (the two-dimensional
case of Kung, Luccio and Preparata, "On Finding the Maxima of a Set of Vectors", J. ACM 22(4), 1975):
O(n log n), columnar (numpy), no Python loop over the points.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def pareto_frontier(maximise: npt.ArrayLike, minimise: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Which points are on the Pareto frontier of (``maximise`` up, ``minimise`` down).

    Args:
        maximise: one value per point, larger is better (e.g. requests/s).
        minimise: one value per point, smaller is better (e.g. p95 latency, ns); same length.

    Returns:
        A boolean array, True for the points no other point dominates (module docstring). A point with a NaN in
        either objective is never on the frontier and dominates nothing.

    Raises:
        ValueError: the two inputs differ in length or are not one-dimensional.
    """
    up = np.asarray(maximise, dtype=np.float64)
    down = np.asarray(minimise, dtype=np.float64)
    if up.ndim != 1 or up.shape != down.shape:
        raise ValueError(f"expected two 1-d arrays of one length, got shapes {up.shape} and {down.shape}")
    on = np.zeros(up.shape, dtype=np.bool_)
    known = np.flatnonzero(~(np.isnan(up) | np.isnan(down)))
    if known.size == 0:
        return on
    # Best first: throughput descending, then latency ascending.
    order = known[np.lexsort((down[known], -up[known]))]
    ups, downs = up[order], down[order]
    starts = np.flatnonzero(np.r_[True, ups[1:] != ups[:-1]])
    group_best = np.minimum.reduceat(downs, starts)
    # The best latency among strictly higher throughputs: a point must beat it to be undominated.
    before = np.r_[np.inf, np.minimum.accumulate(group_best)[:-1]]
    group = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, ups.size]))
    on[order] = (downs == group_best[group]) & (downs < before[group])
    return on
