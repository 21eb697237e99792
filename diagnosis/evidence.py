"""One evidence discipline for every rule that compares two groups of requests or calls (halves of a window,
requests alongside a load against those apart from it, the largest batches against the smallest, a worker's
first calls against its warm ones, a call's freezing against its process's chance rate).

A comparison earns a finding above ``info`` only when it passes three gates, and says which one it failed:

1. **Counts**: each side holds at least ``min_count`` observations. A median of three requests is one request.
2. **Significance**: a one-sided test suited to the figure rejects "no difference" at :data:`ALPHA`, divided
   among the comparisons the rule tried (Bonferroni: a rule that looks at six tier pairs two ways may not take
   the best of twelve chances as evidence):

   - latencies and other durations: the Mann-Whitney U rank test (Mann & Whitney, 1947), exact for small samples,
     which asks whether one side's values tend to be larger without assuming a distribution (a latency's is
     heavy-tailed, so no t-test);
   - counts of events in two equal stretches of time: the conditional binomial test of two Poisson rates
     (Przyborowski & Wilenski, 1940): given ``n = a + b`` arrivals, ``b ~ Binomial(n, t_b / (t_a + t_b))``
     when the rate did not change;
   - shares of requests (dropped, frozen): Fisher's exact test of the 2x2 table, or, against a known chance
     rate, the exact binomial test;
   - a median against a fixed cost (a step's self time against 1 ms): the sign test.
3. **Effect size**: the difference matters in the request's latency: the ratio of the sides' medians (or
   shares) reaches the rule's ``min_effect_ratio``. Significance alone is not enough: with thousands of requests
   a 2% shift is significant and no one's problem.

The finding's confidence derives from the tests: the product of ``1 - p`` over the comparisons it rests on
(:func:`joint_confidence`), so a finding resting on two tests at p = 0.01 each has 0.98, and one that could not
reach significance keeps its numbers at ``info`` (:func:`capped`). :class:`EvidenceTest` is what a finding shows of
each test (``Finding.tests``).

The tests are SciPy's (``scipy.stats.mannwhitneyu``, ``binomtest``, ``fisher_exact``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from diagnosis.findings import EvidenceTest, Severity, TestName

if TYPE_CHECKING:
    from types import ModuleType

ALPHA = 0.01
"""Significance level of one finding's evidence, one-sided: one false finding in a hundred windows where the
pattern is absent, before the division among a rule's comparisons."""

MAX_EFFECT_RATIO = 1e6
"""Where an effect ratio stops (a side growing from nothing): finite, so a finding's JSON stays valid."""


def _stats() -> ModuleType:
    """``scipy.stats``, imported on a rule's first comparison rather than when the server starts: SciPy and its own
    OpenBLAS cost the served process 74 MiB on a 2-core host and some 200 MiB more on a many-core CI host (its BLAS
    threads), which ingest under overload never uses (tests/reliability/test_reliability_overload.py)."""
    from scipy import stats

    return stats


def _judged(
    claim: str,
    name: TestName,
    counts: tuple[int, int],
    p_value: float,
    effect: float | None,
    *,
    min_count: int,
    min_effect_ratio: float,
    tries: int,
    enough: bool | None = None,
) -> EvidenceTest:
    """The test's record; ``enough`` defaults to both ``counts`` reaching ``min_count``."""
    alpha = ALPHA / max(tries, 1)
    effect = min(effect, MAX_EFFECT_RATIO) if effect is not None and not math.isnan(effect) else None
    p_value = min(1.0, max(0.0, float(p_value))) if math.isfinite(p_value) else 1.0
    enough = min(counts) >= min_count if enough is None else enough
    return EvidenceTest(
        claim=claim,
        name=name,
        counts=counts,
        min_count=min_count,
        p_value=round(p_value if enough else 1.0, 6),
        alpha=alpha,
        effect_ratio=None if effect is None else round(effect, 3),
        min_effect_ratio=min_effect_ratio,
        enough=enough,
        significant=enough and p_value < alpha and effect is not None and effect >= min_effect_ratio,
    )


def larger_values(
    claim: str,
    baseline: Sequence[float] | np.ndarray,
    suspect: Sequence[float] | np.ndarray,
    *,
    min_count: int,
    min_effect_ratio: float,
    tries: int = 1,
    quantile: float | None = 0.5,
) -> EvidenceTest:
    """Whether ``suspect``'s values (durations: any one unit) tend to be larger than ``baseline``'s: the one-sided
    Mann-Whitney U test, effect = ``quantile`` of ``suspect`` over that of ``baseline`` (the median by default;
    a rule judging tail latency passes 0.95; ``None``: the means, for counts such as requests in flight, whose
    median is often 0). Ties (equal durations) are handled by SciPy's tie correction."""
    low = np.asarray(baseline, dtype=float)
    high = np.asarray(suspect, dtype=float)
    counts = (int(low.size), int(high.size))
    if min(counts) == 0:
        return _judged(
            claim,
            "mann_whitney_u",
            counts,
            1.0,
            None,
            min_count=min_count,
            min_effect_ratio=min_effect_ratio,
            tries=tries,
        )
    p_value = float(_stats().mannwhitneyu(high, low, alternative="greater").pvalue)
    if quantile is None:
        base, top = float(low.mean()), float(high.mean())
    else:
        base, top = float(np.quantile(low, quantile)), float(np.quantile(high, quantile))
    effect = top / base if base > 0 else (MAX_EFFECT_RATIO if top > 0 else None)
    return _judged(
        claim,
        "mann_whitney_u",
        counts,
        p_value,
        effect,
        min_count=min_count,
        min_effect_ratio=min_effect_ratio,
        tries=tries,
    )


def higher_rate(
    claim: str,
    baseline_count: int,
    suspect_count: int,
    *,
    baseline_exposure: float = 1.0,
    suspect_exposure: float = 1.0,
    min_count: int,
    min_effect_ratio: float,
    tries: int = 1,
) -> EvidenceTest:
    """Whether events (arrivals) came at a higher rate over ``suspect_exposure`` than over ``baseline_exposure``
    (the same unit on both, seconds or ns): the conditional binomial test of two Poisson rates. ``min_count``
    applies to the events of both sides together (a rate rising from none is a rise). Effect = the ratio of the
    rates, with one event added to each side so a side without any stays finite."""
    total = baseline_count + suspect_count
    share = suspect_exposure / (baseline_exposure + suspect_exposure)
    p_value = float(_stats().binomtest(suspect_count, total, share, alternative="greater").pvalue) if total else 1.0
    effect = ((suspect_count + 1) / suspect_exposure) / ((baseline_count + 1) / baseline_exposure)
    counts = (baseline_count, suspect_count)
    return _judged(
        claim,
        "poisson_rate",
        counts,
        p_value,
        effect,
        min_count=min_count,
        min_effect_ratio=min_effect_ratio,
        tries=tries,
        enough=total >= min_count,
    )


def larger_share(
    claim: str,
    baseline: tuple[int, int],
    suspect: tuple[int, int],
    *,
    min_count: int,
    min_rise: float,
    tries: int = 1,
) -> EvidenceTest:
    """Whether ``suspect``'s share (``(hits, of)``, e.g. dropped requests of all) exceeds ``baseline``'s: Fisher's
    exact test, one-sided. The effect is the rise of the share (suspect minus baseline, 0..1) reported as
    ``1 + rise`` against ``1 + min_rise``, so that every test's effect reads as a ratio."""
    (k0, n0), (k1, n1) = baseline, suspect
    counts = (int(n0), int(n1))
    if min(counts) == 0:
        return _judged(
            claim, "fisher_exact", counts, 1.0, None, min_count=min_count, min_effect_ratio=1 + min_rise, tries=tries
        )
    table = [[k1, n1 - k1], [k0, n0 - k0]]
    p_value = float(_stats().fisher_exact(table, alternative="greater").pvalue)
    rise = k1 / n1 - k0 / n0
    return _judged(
        claim,
        "fisher_exact",
        counts,
        p_value,
        1 + rise,
        min_count=min_count,
        min_effect_ratio=1 + min_rise,
        tries=tries,
    )


def above_chance(
    claim: str,
    hits: int,
    of: int,
    *,
    chance: tuple[int, int],
    min_count: int,
    min_effect_ratio: float,
    tries: int = 1,
) -> EvidenceTest:
    """Whether ``hits`` of ``of`` are more than a chance rate explains: the exact binomial test at the rate
    observed elsewhere (``chance = (hits, of)`` there), estimated as Jeffreys' ``(hits + 0.5) / (of + 1)``
    (Brown, Cai & DasGupta, Statistical Science 16(2), 2001) so that a baseline without a single hit still allows
    some. ``counts`` are (chance's ``of``, ``of``), ``min_count`` applies to ``of`` (the chance side may be
    empty: rate 0.5 / 1). Effect = the
    observed share over the chance rate."""
    rate = (chance[0] + 0.5) / (chance[1] + 1)
    p_value = float(_stats().binomtest(hits, of, rate, alternative="greater").pvalue) if of else 1.0
    effect = (hits / of) / rate if of else None
    return _judged(
        claim,
        "binomial",
        (chance[1], of),
        p_value,
        effect,
        min_count=min_count,
        min_effect_ratio=min_effect_ratio,
        tries=tries,
        enough=of >= min_count,
    )


def median_above(
    claim: str,
    values: Sequence[float] | np.ndarray,
    threshold: float,
    *,
    min_count: int,
    tries: int = 1,
) -> EvidenceTest:
    """Whether the median of ``values`` exceeds ``threshold`` (same unit): the sign test, the exact binomial test
    of the values above the threshold against half of those off it (values equal to it drop out; Dixon & Mood,
    JASA 41(236), 1946). A median just over the line with as many calls under it is no evidence that the step
    costs that much. ``counts`` are (values at or under, values above); effect = the median over the threshold
    (needed: > 1)."""
    array = np.asarray(values, dtype=float)
    above = int((array > threshold).sum())
    off = int((array != threshold).sum())
    p_value = float(_stats().binomtest(above, off, 0.5, alternative="greater").pvalue) if off else 1.0
    effect = float(np.median(array)) / threshold if array.size and threshold > 0 else None
    return _judged(
        claim,
        "sign_test",
        (int(array.size) - above, above),
        p_value,
        effect,
        min_count=min_count,
        min_effect_ratio=1.0,
        tries=tries,
        enough=array.size >= min_count,
    )


def joint_confidence(tests: Iterable[EvidenceTest]) -> float:
    """The finding's confidence from the tests it rests on: the product of ``1 - p`` (0..1, two decimals);
    1.0 for none."""
    product = 1.0
    for test in tests:
        product *= 1.0 - test.p_value
    return round(product, 2)


def capped(severity: Severity, tests: Iterable[EvidenceTest]) -> Severity:
    """``severity`` when every test is evidence (:attr:`EvidenceTest.significant`), else ``info``: a comparison
    that cannot reach significance keeps its numbers but never raises a warning."""
    return severity if all(test.significant for test in tests) else "info"
