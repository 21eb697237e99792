"""What a diagnosis rule returns: a named cause with its severity, confidence, evidence and remedy.

Evidence keys say their unit: ``<quantity>_<unit>`` optionally followed by a statistic, e.g. ``queue_ms_p95``,
``top_k_count_p50``, ``stall_ms_total``, ``decode_share`` (units in :data:`EVIDENCE_UNIT_SUFFIXES`, statistics in
:data:`EVIDENCE_STATISTICS`), so a reader never guesses whether ``0.3`` is seconds or a fraction;
``example_trace_ids`` lists up to a few traces that show the pattern best.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

Severity = Literal["info", "warning", "critical"]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
"""Severities from least to most urgent."""

EvidenceValue = int | float | str | bool | list[str] | None

EVIDENCE_UNIT_SUFFIXES: tuple[str, ...] = (
    "_ns",
    "_ms",
    "_s",
    "_tokens",
    "_count",
    "_share",
    "_ratio",
    "_correlation",
    "_per_s",
    "_bytes",
    "_ids",
    "_name",
    "_names",
    "_key",
    "_source",
)
"""Every evidence key ends with one of these (before any statistic): a unit (``_ms``, ``_tokens``), a
dimensionless kind (``_share`` in [0, 1], ``_ratio``, ``_correlation`` in [-1, 1], ``_count``), or a label
(``_name``, ``_ids``, ``_key``, ``_source``)."""
EVIDENCE_STATISTICS: tuple[str, ...] = ("_p5", "_p25", "_p50", "_p95", "_p99", "_min", "_max", "_mean", "_total")
"""Statistic suffixes that may follow the unit."""


def evidence_key_ok(key: str) -> bool:
    """True when ``key`` follows the evidence naming rule (a unit suffix, then optionally a statistic)."""
    for statistic in EVIDENCE_STATISTICS:
        if key.endswith(statistic):
            key = key[: -len(statistic)]
            break
    return key.endswith(EVIDENCE_UNIT_SUFFIXES)


EXAMPLE_TRACES = 3
"""Example trace IDs a finding lists."""


TestName = Literal["mann_whitney_u", "poisson_rate", "fisher_exact", "binomial", "sign_test"]
"""The tests :mod:`diagnosis.evidence` runs."""


class EvidenceTest(BaseModel):
    """One comparison a finding rests on, with everything needed to judge it again.

    Attributes:
        claim: what was tested, in words ("tier P0's latency alongside tier P2's load > apart from it").
        name: the test (:data:`TestName`).
        counts: observations on each side, baseline side first (requests, calls or arrivals).
        min_count: least observations per side the rule needs to judge.
        p_value: one-sided p-value, 0..1 (1.0 when the counts were too few to test).
        alpha: the level it had to beat (:data:`ALPHA` over the comparisons the rule tried).
        effect_ratio: the suspected side over the baseline side (medians, rates or shares); ``None`` when a side
            is empty or zero.
        min_effect_ratio: the least effect that matters in latency, per the rule's configuration.
        enough: the counts reach ``min_count`` (on each side, or in all for a rate).
        significant: all three gates passed (counts, p-value, effect).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    claim: str
    name: TestName
    counts: tuple[int, int]
    min_count: int = Field(ge=1)
    p_value: float = Field(ge=0, le=1)
    alpha: float = Field(gt=0, lt=1)
    effect_ratio: float | None
    min_effect_ratio: float
    enough: bool
    significant: bool

    @property
    def why_not(self) -> str | None:
        """Why the comparison is not evidence (the first gate it failed), ``None`` when it is."""
        if not self.enough:
            return f"too few to compare ({self.counts[0]} and {self.counts[1]}; {self.min_count} needed on each side)"
        if self.p_value >= self.alpha:
            return f"could be chance (p = {self.p_value:.2g}, needs < {self.alpha:.2g})"
        if self.effect_ratio is None or self.effect_ratio < self.min_effect_ratio:
            shown = "n/a" if self.effect_ratio is None else f"{self.effect_ratio:.2f}x"
            return f"too small to matter ({shown}, needs {self.min_effect_ratio:.2f}x)"
        return None


class Finding(BaseModel):
    """One diagnosed cause.

    Attributes:
        cause: the rule's cause name (``queue_saturation`` ...), stable for machines.
        title: one line for people, with the headline number.
        severity: ``info`` (worth knowing), ``warning`` (costs latency now), ``critical`` (dominates latency).
        confidence: 0..1, how sure the rule is that the cause is real (signal margin, sample size,
            corroborating signals such as engine metrics).
        evidence: numbers with units in their key names, plus ``example_trace_ids``.
        remedy: what to change, concretely.
        tests: the comparisons the finding rests on (:class:`EvidenceTest`).
        latency_share: share (0..1) of end-to-end latency the cause accounts for, or ``None``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    cause: str = Field(description="Cause name, e.g. `queue_saturation`.")
    title: str = Field(description="One line with the headline number.")
    severity: Severity = Field(description="`info`, `warning` or `critical`.")
    confidence: float = Field(ge=0, le=1, description="0..1: signal margin, sample size and corroboration.")
    evidence: dict[str, EvidenceValue] = Field(
        description="Numbers with units in the key names (`_ms`, `_share` in [0, 1], `_count` ...) and "
        "`example_trace_ids`."
    )
    remedy: str = Field(description="What to change.")
    tests: list[EvidenceTest] = Field(
        default_factory=list,
        description="The comparisons the finding rests on (diagnosis/evidence.py), each with its counts, p-value "
        "and effect; empty for a finding that rests on structure alone (a span that is there or not).",
    )
    latency_share: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Share (0..1) of end-to-end latency on the critical path the cause accounts for, where the rule "
        "measures one: findings of one severity rank by it.",
    )


def rank_findings(
    findings: Iterable[Finding], locating: Collection[str] = (), corroborating: Collection[str] = ()
) -> list[Finding]:
    """``findings`` ordered by severity (critical first); within a severity, causes before findings of the
    ``locating`` rules (where latency goes, not why: ``Rule.locates_only``), and findings whose comparisons all
    passed (:attr:`EvidenceTest.significant`, or that rest on none) before those with a comparison that did not,
    except the ``corroborating`` rules' (``Rule.tests_corroborate``: the finding rests on a share it measures, a
    failed test only kept it from a higher severity);
    then by the latency they explain (``latency_share``, none counting as 0); then confidence (highest first), then
    cause name. A warning exists only with its evidence (:func:`diagnosis.evidence.capped`), so the one that
    explains most latency leads; an ``info`` finding whose comparison failed (kept for its numbers) comes after
    every other ``info`` finding, however small its p-value; a blocking call that stalls 1% of latency, however
    sure, after decode that is half of it."""

    def key(finding: Finding) -> tuple[int, bool, bool, float, float, str]:
        unsupported = finding.cause not in corroborating and not all(test.significant for test in finding.tests)
        impact = finding.latency_share or 0.0
        return (
            -SEVERITIES.index(finding.severity),
            finding.cause in locating,
            unsupported,
            -impact,
            -finding.confidence,
            finding.cause,
        )

    return sorted(findings, key=key)


def severity_for(value: float, warning: float, critical: float) -> Severity | None:
    """``critical`` at or above ``critical``, ``warning`` at or above ``warning``, else ``None``."""
    if value >= critical:
        return "critical"
    if value >= warning:
        return "warning"
    return None


def sample_factor(samples: int, full: int) -> float:
    """Confidence multiplier for a signal seen ``samples`` times: 0.5 for one sample, rising linearly to 1.0
    at ``full`` samples (a pattern in two requests may be chance; in ``full`` it is not)."""
    return 0.5 + 0.5 * min(1.0, max(samples - 1, 0) / max(full - 1, 1))


def confidence(base: float, *, samples: int, full: int) -> float:
    """``base`` (clipped to 0..1) times :func:`sample_factor`, rounded to two decimals."""
    return round(min(1.0, max(0.0, base)) * sample_factor(samples, full), 2)


def ms(ns: float | None) -> float | None:
    """Nanoseconds as milliseconds rounded to the µs; ``None`` (or NaN) stays ``None``."""
    if ns is None or math.isnan(ns):
        return None
    return round(ns / 1e6, 3)


def ratio(value: float | None, digits: int = 3) -> float | None:
    """A share or ratio rounded for display; ``None``, NaN or infinity become ``None``."""
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


def margin(value: float, low: float, high: float) -> float:
    """How far ``value`` lies from ``low`` towards ``high``, clipped to 0..1 (0 when ``high <= low``)."""
    if high <= low:
        return 0.0
    return min(1.0, max(0.0, (value - low) / (high - low)))
