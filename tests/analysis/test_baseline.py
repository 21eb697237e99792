"""The anomaly detector's statistics: median and scaled MAD, robust z-scores, floors and material change, the count
test of exceedances."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from analysis.baseline import (
    MAD_TO_SIGMA,
    MetricRule,
    binomial_tail,
    exceeds_baseline_rate,
    normal_tail,
    robust_baselines,
    robust_scores,
)

LATENCY = MetricRule("up", relative_floor=0.1, absolute_floor=1.0, min_ratio=1.5, min_delta=5.0)
THROUGHPUT = MetricRule("down", relative_floor=0.1, absolute_floor=1.0, min_ratio=2.0)


def _samples(values: dict[str, list[float | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        {"s": [k for k, v in values.items() for _ in v], "value": [x for v in values.values() for x in v]},
        schema={"s": pl.String, "value": pl.Float64},
    )


def test_median_and_scaled_mad_per_series_ignore_nulls() -> None:
    base = robust_baselines(_samples({"a": [1.0, 2.0, 3.0, 4.0, 100.0, None], "b": [5.0, 5.0, 5.0]}), ["s"])
    rows = {row["s"]: row for row in base.iter_rows(named=True)}
    # a: median 3, |x - 3| = 2, 1, 0, 1, 97 -> MAD 1.
    assert rows["a"]["median"] == 3.0 and rows["a"]["sigma"] == pytest.approx(MAD_TO_SIGMA)
    assert rows["a"]["samples"] == 5
    assert rows["b"]["median"] == 5.0 and rows["b"]["sigma"] == 0.0


def test_mad_estimates_sigma_of_normal_data_despite_a_quarter_of_outliers() -> None:
    rng = np.random.default_rng(3)
    values = np.r_[rng.normal(100.0, 10.0, 3000), np.full(1000, 10_000.0)]
    base = robust_baselines(_samples({"a": values.tolist()}), ["s"])
    # The median moves a little towards the outliers; sigma stays of the order of 10, not thousands.
    assert 100.0 <= base["median"][0] < 115.0 and 9.0 < base["sigma"][0] < 20.0


def test_a_latency_spike_deviates_and_noise_does_not() -> None:
    rng = np.random.default_rng(5)
    base = robust_baselines(_samples({"a": rng.normal(100.0, 5.0, 30).tolist()}), ["s"])
    observed = pl.DataFrame({"s": ["a", "a"], "value": [112.0, 400.0]}).with_row_index("i")
    scored = pl.concat(
        [robust_scores(observed.filter(pl.col("i") == i).drop("i"), base, ["s"], LATENCY) for i in (0, 1)]
    )
    assert scored["deviates"].to_list() == [False, True]
    assert scored["score"][1] > 3.5


def test_a_steady_series_floors_its_scale_so_a_small_wobble_is_no_deviation() -> None:
    base = robust_baselines(_samples({"a": [100.0] * 20}), ["s"])
    scored = robust_scores(pl.DataFrame({"s": ["a"], "value": [108.0]}), base, ["s"], LATENCY)
    # sigma 0 would make 108 infinitely unusual; the floor (10 % of 100) makes it a score of 0.8.
    assert scored["scale"][0] == 10.0 and scored["score"][0] == pytest.approx(0.8) and not scored["deviates"][0]


def test_a_large_score_without_a_material_change_is_no_deviation() -> None:
    # A 2 ms series: 4 ms is 2x (score 2 / max(0.1 * 2, 1 ms floor) = 2) - under the limit and under 5 ms anyway.
    base = robust_baselines(_samples({"a": [2.0] * 20}), ["s"])
    scored = robust_scores(pl.DataFrame({"s": ["a"], "value": [4.0]}), base, ["s"], LATENCY, z_limit=1.0)
    assert scored["score"][0] == pytest.approx(2.0) and not scored["deviates"][0]


def test_throughput_deviates_downwards_only() -> None:
    base = robust_baselines(_samples({"a": [60.0, 62.0, 58.0, 61.0, 59.0]}), ["s"])
    scored = robust_scores(pl.DataFrame({"s": ["a", "b"], "value": [20.0, 5.0]}), base, ["s"], THROUGHPUT)
    surge = robust_scores(pl.DataFrame({"s": ["a"], "value": [200.0]}), base, ["s"], THROUGHPUT)
    # "b" has no baseline: not judged at all.
    assert scored["s"].to_list() == ["a"] and scored["deviates"][0]
    assert surge["score"][0] < 0 and not surge["deviates"][0]


def test_too_few_baseline_samples_judge_nothing() -> None:
    base = robust_baselines(_samples({"a": [10.0, 11.0, 10.0]}), ["s"])
    scored = robust_scores(pl.DataFrame({"s": ["a"], "value": [1000.0]}), base, ["s"], LATENCY, min_samples=5)
    assert scored.height == 0


def test_binomial_tail_matches_the_sum_of_its_terms() -> None:
    n, p = 24, 0.05
    # P(X >= 3) = 1 - P(0) - P(1) - P(2), written out.
    head = sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(3))
    assert binomial_tail(3, n, p) == pytest.approx(1 - head, rel=1e-12)
    assert binomial_tail(0, n, p) == 1.0 and binomial_tail(25, n, p) == 0.0
    assert binomial_tail(24, n, p) == pytest.approx(p**24, rel=1e-9)
    # Large counts stay finite and exact enough: half of 100 000 calls at a 5 % rate is impossible.
    assert binomial_tail(50_000, 100_000, p) < 1e-300 or binomial_tail(50_000, 100_000, p) == 0.0
    assert normal_tail(5.0) == pytest.approx(2.8665e-7, rel=1e-4)


def test_a_stall_of_two_calls_is_not_an_exceedance_and_a_slowed_minute_is() -> None:
    # Baseline: five minutes of 24 calls, about 5 % of them slower than the baseline's p95.
    assert not exceeds_baseline_rate(2, 24, 6, 120)
    assert not exceeds_baseline_rate(6, 24, 6, 120)  # a quarter of the minute: still within chance at z = 5
    assert exceeds_baseline_rate(20, 24, 6, 120)
    # A baseline without one exceedance still allows some (Jeffreys rate 0.5 / 121): two calls are not enough.
    assert not exceeds_baseline_rate(2, 24, 0, 120)
    assert exceeds_baseline_rate(12, 24, 0, 120)
    # A looser limit accepts fewer.
    assert exceeds_baseline_rate(7, 24, 6, 120, z_limit=3.0) and not exceeds_baseline_rate(7, 24, 6, 120)
