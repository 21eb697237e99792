"""The Pareto frontier (``analysis.pareto``) against its definition.

Source of the rule: Pareto dominance as K. Deb defines it (*Multi-Objective Optimization using Evolutionary
Algorithms*, Wiley 2001, section 2.4): *a* dominates *b* when it is no worse in every objective and strictly better
in one; the frontier is the set of undominated points. Here throughput is maximised and latency minimised, so
*a* dominates *b* when ``a.up >= b.up and a.down <= b.down`` with one inequality strict. The randomized test
compares the sweep with that definition applied pair by pair.
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.pareto import pareto_frontier


def _by_definition(up: np.ndarray, down: np.ndarray) -> np.ndarray:
    known = ~(np.isnan(up) | np.isnan(down))
    on = []
    for i in range(up.size):
        dominated = any(
            known[j] and up[j] >= up[i] and down[j] <= down[i] and (up[j] > up[i] or down[j] < down[i])
            for j in range(up.size)
        )
        on.append(bool(known[i]) and not dominated)
    return np.array(on, dtype=bool)


def test_a_sweep_of_three_configurations() -> None:
    # requests/s and p95 ms of max_num_seqs 8, 32, 128 and a 32 that ran slower in another window.
    up = [10.0, 30.0, 45.0, 30.0]
    down = [900.0, 400.0, 1200.0, 650.0]
    assert pareto_frontier(up, down).tolist() == [False, True, True, False]


def test_ties_and_equal_points() -> None:
    # Equal points do not dominate each other; at equal throughput only the lowest latency survives.
    assert pareto_frontier([5, 5, 5], [1, 1, 2]).tolist() == [True, True, False]
    # At equal latency only the highest throughput survives.
    assert pareto_frontier([1, 2, 3], [7, 7, 7]).tolist() == [False, False, True]


def test_missing_values_are_never_on_the_frontier_and_dominate_nothing() -> None:
    assert pareto_frontier([np.nan, 1.0, 2.0], [0.0, 5.0, np.nan]).tolist() == [False, True, False]
    assert pareto_frontier([], []).tolist() == []


def test_matches_the_definition_on_random_points() -> None:
    rng = np.random.default_rng(16)
    for _ in range(300):
        size = int(rng.integers(1, 40))
        # Few distinct values, so ties are common.
        up = rng.integers(0, 6, size).astype(float)
        down = rng.integers(0, 6, size).astype(float)
        up[rng.random(size) < 0.1] = np.nan
        assert pareto_frontier(up, down).tolist() == _by_definition(up, down).tolist(), (up, down)


def test_rejects_inputs_of_different_lengths() -> None:
    with pytest.raises(ValueError, match="shapes"):
        pareto_frontier([1, 2], [1])
