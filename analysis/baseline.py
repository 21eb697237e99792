"""Robust baselines of per-minute series, and the test of whether an observed value left its baseline: the
statistics of the anomaly detector (:mod:`query.anomaly`). Pure functions on polars frames.

**Baseline.** Per series, the median of its baseline samples (one value per minute) and the median absolute
deviation scaled to a standard deviation, ``sigma = 1.4826 · MAD`` (1.4826 = 1/Φ⁻¹(3/4) makes the MAD a
consistent estimator of σ for normal data: Rousseeuw & Croux, "Alternatives to the Median Absolute Deviation",
JASA 88(424), 1993). Both ignore up to half of the samples being wild, so a baseline holding an earlier spike or
an outage minute still describes the usual.

**Score.** The robust z-score of an observation, ``(x - median) / sigma`` signed so that positive is worse: the
modified z-score of Iglewicz and Hoaglin ("How to Detect and Handle Outliers", ASQC, 1993; NIST/SEMATECH
e-Handbook of Statistical Methods §1.3.5.17, which recommends flagging above 3.5).

**No threshold alone, no deviation by a hair.** A steady series has a MAD near 0, which would make any wobble an
outlier; the scale is therefore floored at a share of the median and an absolute amount (:class:`MetricRule`), and
a deviation also needs a material change (a ratio and an absolute delta): a robust score above the limit *and*
a change an operator would care about. Too few baseline samples (``min_samples``) judge nothing.

**Counted, not pointed.** A p95 of a minute of two dozen calls is its second slowest call, so a score above the limit
can rest on two calls one host stall delayed. :func:`exceeds_baseline_rate` is the count test a detector confirms such a
deviation with: how many of the window's calls are slower than the baseline's p95 (the median of its minutes' p95,
robust to a bad minute in it) against the share of the baseline window's calls that are (about 5 %), judged with the
binomial tail at the same false-alarm rate as the score's limit. It is the proportion-of-failures test of Value-at-Risk
backtesting (Kupiec, "Techniques for Verifying the Accuracy of Risk Measurement Models", J. Derivatives 3(2), 1995:
exceedances of a quantile counted and tested against their binomial count) and the shape of a latency SLI, the share of
requests slower than a threshold (Google, The Site Reliability Workbook, ch. 2, 2018). A fault that slows every call
passes it with a handful of calls; a stall that delays two or three of two dozen does not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

MAD_TO_SIGMA = 1.4826
"""``1 / Φ⁻¹(0.75)``: the MAD times this estimates σ of normal data (Rousseeuw & Croux 1993)."""

OUTLIER_Z = 3.5
"""Robust z-score above which one value is an outlier (Iglewicz & Hoaglin 1993; NIST e-Handbook §1.3.5.17)."""

Z_LIMIT = 5.0
"""The limit the detector uses: above :data:`OUTLIER_Z` because it judges many series every minute. A hundred
series judged each minute at 3.5 (one-sided normal tail 2.3e-4) would raise about 33 false alarms a day; at 5 (tail
2.9e-7), about one in 24 days (a Bonferroni-style correction for the number of tests)."""


@dataclass(frozen=True)
class MetricRule:
    """How one metric deviates.

    Attributes:
        direction: ``up`` (larger is worse: latency, error rate) or ``down`` (smaller is worse: throughput).
        relative_floor: the scale is at least this share of the baseline median.
        absolute_floor: and at least this much, in the metric's unit.
        min_ratio: a deviation changes the value at least this factor in the bad direction (``up``: observed ≥
            median × min_ratio; ``down``: observed × min_ratio ≤ median); 1 for none.
        min_delta: and at least this much in the metric's unit.
    """

    direction: Literal["up", "down"]
    relative_floor: float
    absolute_floor: float
    min_ratio: float = 1.0
    min_delta: float = 0.0


def robust_baselines(samples: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Per series, the median and robust sigma of its samples.

    Args:
        samples: the ``keys`` columns and ``value`` (Float64; nulls ignored), one row per baseline sample.
        keys: the columns naming a series.

    Returns:
        The ``keys``, ``median``, ``sigma`` (``MAD_TO_SIGMA`` × median absolute deviation; Float64 in the
        value's unit) and ``samples`` (UInt32, non-null values); one row per series with a value.
    """
    values = samples.filter(pl.col("value").is_not_null())
    median = pl.col("value").median()
    # One grouping: the median inside the MAD is the group's own (a window function first took as long again).
    return values.group_by(keys, maintain_order=True).agg(
        median.alias("median"),
        ((pl.col("value") - median).abs().median() * MAD_TO_SIGMA).alias("sigma"),
        pl.len().cast(pl.UInt32).alias("samples"),
    )


def robust_scores(
    observed: pl.DataFrame,
    baselines: pl.DataFrame,
    keys: Sequence[str],
    rule: MetricRule,
    *,
    z_limit: float = Z_LIMIT,
    min_samples: int = 5,
) -> pl.DataFrame:
    """Each observed series against its baseline.

    Args:
        observed: the ``keys`` and ``value`` (Float64), one row per series.
        baselines: :func:`robust_baselines` of the same keys (or rows of that shape from elsewhere, e.g. a
            baseline an open incident kept).
        keys: the columns naming a series.
        rule: the metric's rule.
        z_limit: the robust z-score a deviation exceeds.
        min_samples: fewest baseline samples a judgement needs.

    Returns:
        Rows of ``observed`` that have a baseline of ``min_samples`` or more: the ``keys``, ``value``,
        ``median``, ``sigma``, ``samples``, ``scale`` (the floored sigma), ``score`` (robust z, positive =
        worse) and ``deviates`` (Boolean: score above ``z_limit`` and the change material).
    """
    worse = pl.col("value") - pl.col("median") if rule.direction == "up" else pl.col("median") - pl.col("value")
    scale = pl.max_horizontal(
        pl.col("sigma"), pl.col("median").abs() * rule.relative_floor, pl.lit(rule.absolute_floor)
    )
    if rule.direction == "up":
        ratio_ok = pl.col("value") >= pl.col("median") * rule.min_ratio
    else:
        ratio_ok = pl.col("value") * rule.min_ratio <= pl.col("median")
    return (
        observed.filter(pl.col("value").is_not_null())
        .join(baselines, on=list(keys), how="inner")
        .filter(pl.col("samples") >= min_samples)
        .with_columns(scale.alias("scale"), worse.alias("worse"))
        .with_columns((pl.col("worse") / pl.col("scale")).alias("score"))
        .with_columns(((pl.col("score") > z_limit) & ratio_ok & (pl.col("worse") >= rule.min_delta)).alias("deviates"))
        .drop("worse")
    )


def normal_tail(z: float) -> float:
    """``P(Z > z)`` for a standard normal ``Z``: the false-alarm rate of a one-sided limit ``z``."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def binomial_tail(k: int, n: int, p: float) -> float:
    """``P(X >= k)`` for ``X ~ Binomial(n, p)``, summed in log space from ``k`` up (exact; stops once the terms,
    past the mode, no longer change the sum)."""
    if k <= 0 or p >= 1.0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k, n + 1):
        term = math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q)
        total += term
        if i > n * p and term < total * 1e-16:
            break
    return min(total, 1.0)


def exceeds_baseline_rate(
    over: int, calls: int, baseline_over: int, baseline_calls: int, *, z_limit: float = Z_LIMIT
) -> bool:
    """Whether ``over`` of a window's ``calls`` beyond a threshold are more than the baseline's rate explains:
    the binomial tail of ``over`` at the baseline rate is below the normal tail of ``z_limit`` (the false-alarm
    rate of the robust score's limit). The baseline rate is the Jeffreys estimate ``(baseline_over + 0.5) /
    (baseline_calls + 1)`` (Brown, Cai & DasGupta, "Interval Estimation for a Binomial Proportion", Statistical
    Science 16(2), 2001), so a baseline without a single exceedance still allows some. Counts are calls (spans or
    requests), not minutes."""
    rate = (baseline_over + 0.5) / (baseline_calls + 1)
    return binomial_tail(over, calls, rate) < normal_tail(z_limit)
