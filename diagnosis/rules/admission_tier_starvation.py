"""``admission_tier_starvation``: a lower priority tier's traffic rises and a higher tier's requests get slower or
dropped: the low tier takes the capacity the high tier should have had first.

Trace signal: each request's tier, latency and whether it was dropped (:mod:`diagnosis.tiers`, with this rule's
``tier_keys``, ``tier_order``, ``drop_statuses`` and ``rejected_event_names``; the entry span's attribute, such as
``gateway.priority_tier`` on the stack's gateway SERVER span, ``hotspan.tier``, ``priority``, or vLLM's request
priority as ``gen_ai.request.priority``).

For each tier, the time its requests started over is split in two halves at the midpoint. A higher tier
*starves* when, from the first half to the second, a lower tier's load grows by ``volume_growth_ratio`` (its
arrivals in the same halves, counts + 1 so a tier that appears counts, or its arrivals within one holding time
before each of the higher tier's requests; at least ``min_lower_requests`` of its requests overlapping the second
half's) while the higher tier's median or p95 latency grows by
``latency_growth_ratio`` or its drop share rises by ``drop_share_rise``. The halves are read both ways
(:data:`HALVES`): a lower tier whose load fell from the first half to the second while the higher tier recovered is
the same starving, seen from its end (``halves_receding``; its evidence's ``first`` side is then the calm second
half, ``second`` the loaded first, as in the comparison by load). The median counts as well as the p95
because a half often holds a handful of requests, whose p95 is their slowest one: one request of the first half
already caught by the rising load (the stack's tier flood: 0.5-1.6 s before, one at 3.2 s, 3-3.6 s after) is
enough to hide the growth from the p95 alone.

A flood shorter than half the window hides in its half: ten seconds of a backlog among two minutes of steady
requests moved the P0 p95 of the live stack's second half 1.3x. So the higher tier's requests are also compared
by load: those that started just after a surge of the lower tier's arrivals against the others. A surge is
``surge_arrivals_min`` or more lower-tier arrivals within one holding time of the lower tier (the 90th percentile
of its latency: a backlog drains as long as its slowest requests wait) before the request's start, and
``volume_growth_ratio`` times the median the higher tier's requests met; the same
thresholds apply (at least ``min_requests_per_half`` in each group); the same ten seconds are 5x at the p95
there. Load is counted in arrivals, not in requests in flight: by Little's law requests stay in flight longer
whenever the system is slow, whatever slowed it, so in-flight counts rise with the very latency they would
explain (on the stack's clean default workload, P1 requests ran "alongside" 1.4 P2 requests in flight against 0.1
and were 2.9x slower, p = 0.0002: both were slow together). Of the pairs starving by either comparison the one
whose higher tier suffered most, times the lower tier's load growth, is reported (evidence ``comparison_name``),
with the per-tier latency and drops (:func:`diagnosis.tiers.tier_stats`, what the Services page shows).

Either comparison blames the lower tier only for load it brought alone: the other tiers' arrivals (the higher
tier's own among them) must not have risen beside it by ``volume_growth_ratio`` (counts + 1 for the halves; for the
comparison by load, a request after a lower-tier surge counts only when the other tiers' arrivals in the same
holding time did not surge by the same definition), unless the lower tier added ``volume_growth_ratio`` times
as many arrivals (over the calm half's, or over its usual for the comparison by load) as they brought in all
(:func:`_outgrew`). When every tier bursts together, as the mooncake replay's interleaved tiers do, the higher tier
is slow because everything arrived at once: load (``queue_saturation``'s question), not one tier taking another's
capacity. Without this control the clean mooncake replay gave a critical finding, P1 requests after a burst of P2
arrivals 2.2 -> 3.9 s, p < 0.001 (benchmarks/README.md). Without its exception the demo's six closed-loop users,
opening at once, hid the tier flood that arrived among them: 11 of their arrivals within the flood's holding time
against their usual 7, beside 56 of the flood's against its usual 22 (34 added against their 11).

A lower tier takes capacity from every tier above it, and each of those may hold only a handful of requests in a
window: so the tiers above a lower one are also judged together, as one higher tier named ``P0+P1``
(:func:`_pooled`), beside each of them alone.

Crossing those thresholds is not yet evidence: the comparison must pass :mod:`diagnosis.evidence` (the higher
tier's latency by the Mann-Whitney U test or its drops by Fisher's exact test; for the halves, the lower tier's
arrivals by the Poisson rate test or its recent arrivals per higher-tier request by the rank test; for the
comparison by load, the lower tier's arrivals within one holding time before the requests after its surge against
those apart from one, by the Poisson rate test: a chance cluster of three arrivals, against two as usual, is not a
flood, however many higher-tier requests met it), else the finding is ``info``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from pydantic import Field

from diagnosis.context import DiagnosisContext
from diagnosis.evidence import capped, higher_rate, joint_confidence, larger_share, larger_values
from diagnosis.findings import EXAMPLE_TRACES, EvidenceTest, Finding, ratio
from diagnosis.rules.base import Rule, RuleConfig
from diagnosis.signals import mean_concurrency, top_traces
from diagnosis.tiers import TierSettings, tier_stats, tiered_requests


class AdmissionTierStarvationConfig(RuleConfig):
    tier_keys: list[str] = Field(min_length=1, description="Span attributes naming a request's tier, first found wins.")
    tier_order: list[str] = Field(
        description="Named tiers, most urgent first (case-insensitive); other values rank by their number."
    )
    drop_statuses: list[int] = Field(description="HTTP statuses of a dropped request: 429 rejected, 503 shed.")
    rejected_event_names: list[str] = Field(description="Span events that mark a request refused at admission.")
    volume_growth_ratio: float = Field(
        gt=1,
        description="Growth of a lower tier's arrivals (counts + 1) or of its arrivals just before the higher tier's "
        "requests, second half over first (or after a surge over apart), that makes it a rising load (ratio).",
    )
    latency_growth_ratio: float = Field(
        gt=1,
        description="Growth of a higher tier's median or p95 latency, second half over first, that worsens it (ratio).",
    )
    latency_growth_critical: float = Field(
        gt=1, description="Growth of the higher tier's median or p95 latency that makes it critical (ratio)."
    )
    drop_share_rise: float = Field(
        gt=0,
        le=1,
        description="Rise of a higher tier's dropped share (0..1), second half minus first, that worsens it.",
    )
    drop_share_critical: float = Field(
        gt=0, le=1, description="Rise of the higher tier's dropped share that makes it critical (0..1)."
    )
    min_requests_per_half: int = Field(
        ge=1, description="Requests of the higher tier needed in each half to compare them. Count."
    )
    min_lower_requests: int = Field(
        ge=1, description="Requests of the lower tier in flight beside the higher tier's second half needed. Count."
    )
    surge_arrivals_min: int = Field(
        ge=1,
        description="Lower-tier arrivals within one lower-tier holding time before a higher-tier request's "
        "start from which it started after a surge, in the comparison by load. Count. With a tier arriving at "
        "its usual rate a holding time holds well under one arrival on the stack's default traffic.",
    )


def tier_settings(config: AdmissionTierStarvationConfig) -> TierSettings:
    """How ``config`` tells requests' tiers and drops."""
    return TierSettings(
        tuple(config.tier_keys),
        tuple(config.tier_order),
        tuple(config.drop_statuses),
        tuple(config.rejected_event_names),
    )


class AdmissionTierStarvation(Rule[AdmissionTierStarvationConfig]):
    """See the module docstring."""

    cause = "admission_tier_starvation"
    config_model = AdmissionTierStarvationConfig
    latency_share = "added_latency_share"

    def evaluate(self, ctx: DiagnosisContext) -> Finding | None:
        config = self.config
        requests = tiered_requests(ctx.analysis.tree, tier_settings(config))
        if requests["rank"].n_unique() < 2:
            return None
        found = self._worst_pair(requests)
        if found is None:
            return None
        high, low, higher = found.high, found.low, found.split
        growth = _latency_growth(high)
        drop_rise = high["dropped_share_second"] - high["dropped_share_first"]
        critical = growth >= config.latency_growth_critical or drop_rise >= config.drop_share_critical
        volume_growth = _volume_growth(low)
        samples = int(high["request_count_first"] + high["request_count_second"])
        overall = tier_stats(requests)
        second = higher.filter(pl.col("half") == "second")
        added_ns = max(0.0, (high["latency_ms_p50_second"] - high["latency_ms_p50_first"]) * 1e6) * second.height
        return Finding(
            cause=self.cause,
            title=_title(found.comparison, high, low, volume_growth),
            severity=capped("critical" if critical else "warning", found.tests),
            confidence=joint_confidence(found.tests),
            tests=list(found.tests),
            evidence={
                "comparison_name": found.comparison,
                "higher_tier_name": high["tier"],
                "lower_tier_name": low["tier"],
                "tier_names": overall["tier"].to_list(),
                "lower_first_half_count": low["request_count_first"],
                "lower_second_half_count": low["request_count_second"],
                "lower_overlapping_second_half_count": low["overlapping_second"],
                "lower_first_half_recent_arrivals_count_mean": ratio(low["recent_first"]),
                "lower_second_half_recent_arrivals_count_mean": ratio(low["recent_second"]),
                "lower_volume_growth_ratio": ratio(volume_growth),
                "other_tiers_load_growth_ratio": ratio(low["others_growth"]),
                "higher_request_count": samples,
                "higher_first_half_ms_p50": ratio(high["latency_ms_p50_first"]),
                "higher_second_half_ms_p50": ratio(high["latency_ms_p50_second"]),
                "higher_first_half_ms_p95": ratio(high["latency_ms_p95_first"]),
                "higher_second_half_ms_p95": ratio(high["latency_ms_p95_second"]),
                "higher_latency_growth_ratio": ratio(growth),
                "higher_first_half_dropped_share": ratio(high["dropped_share_first"]),
                "higher_second_half_dropped_share": ratio(high["dropped_share_second"]),
                "added_latency_share": ratio(min(1.0, added_ns / max(float(requests["duration_ns"].sum()), 1.0))),
                **{key: _per_tier(overall, column) for key, column in _PER_TIER_EVIDENCE.items()},
                "operation_names": sorted(requests["operation"].unique().to_list()),
                "example_trace_ids": top_traces(second, "duration_ns", EXAMPLE_TRACES),
            },
            remedy=f"Keep tier {high['tier']}'s capacity from being taken by tier {low['tier']}: reserve slots (or a "
            "share of the engine's batch) per tier instead of one shared limit, cap the lower tier's share and rate "
            "(token bucket per tenant), preempt or shed lower-tier work when a higher tier queues (vLLM: "
            "--scheduling-policy priority with the request's priority), or route the lower tier to its own "
            "replicas.",
        )

    def _worst_pair(self, requests: pl.DataFrame) -> _Starving | None:
        """The pair whose higher tier suffered most, times its lower tier's load growth, by either comparison
        (:data:`COMPARISONS`) among those whose comparisons are evidence (:mod:`diagnosis.evidence`, the
        significance level divided among the pairs and comparisons that crossed the thresholds: those are the ones
        tried as evidence); failing that, the one that crossed the thresholds without evidence (reported as
        ``info``); ``None`` when no pair crosses them."""
        candidates = []
        ranks = requests["rank"].unique().sort().to_list()
        for lower_rank in ranks[1:]:
            above = [rank for rank in ranks if rank < lower_rank]
            for group in [[rank] for rank in above] + ([above] if len(above) > 1 else []):
                candidates += _candidates(_pooled(requests, group), group[0], lower_rank, self.config)
        scored = [(self._starving(candidate[1], candidate[2]), *candidate) for candidate in candidates]
        crossed = [(score, *candidate) for score, *candidate in scored if score is not None]
        best: tuple[bool, float, _Starving] | None = None
        for score, comparison, high, low, split, lower in crossed:
            tests = self._tests(comparison, high, low, split, lower, tries=len(crossed))
            # The lower tier to blame is the one whose surge was largest beside the suffering: users of a middle
            # tier queued by the same flood are in flight too, but far fewer of them.
            key = (all(test.significant for test in tests), score * min(_volume_growth(low), GROWTH_CAP))
            if best is None or key > best[:2]:
                best = (*key, _Starving(comparison, high, low, split, tests))
        return None if best is None else best[2]

    def _starving(self, high: dict[str, Any], low: dict[str, Any]) -> float | None:
        """How much the higher tier (a :func:`_halves` row) suffered, ``None`` unless the pair crosses the
        thresholds: enough requests on both sides, latency or drops grown, and the lower tier's load risen beside
        it. Whether that is evidence is :meth:`_tests`' to say."""
        config = self.config
        if min(high["request_count_first"], high["request_count_second"]) < config.min_requests_per_half:
            return None
        growth = _latency_growth(high)
        drop_rise = high["dropped_share_second"] - high["dropped_share_first"]
        if growth < config.latency_growth_ratio and drop_rise < config.drop_share_rise:
            return None
        growth_ratio = config.volume_growth_ratio
        if low["overlapping_second"] < config.min_lower_requests or _volume_growth(low) < growth_ratio:
            return None
        others_rose = low["others_growth"] >= growth_ratio
        if not _outgrew(low["lower_added"], others_rose, low["others_load"], growth_ratio):
            return None
        return max(growth, 1.0 + drop_rise)

    def _tests(
        self,
        comparison: str,
        high: dict[str, Any],
        low: dict[str, Any],
        split: pl.DataFrame,
        lower: pl.DataFrame,
        *,
        tries: int,
    ) -> tuple[EvidenceTest, ...]:
        """The evidence of a pair (:mod:`diagnosis.evidence`): the higher tier's suffering (its latency by the
        Mann-Whitney U test, or its drops by Fisher's exact test, whichever is stronger) and the lower tier's load
        rising: for the halves (:data:`HALVES`), its arrivals by the Poisson rate test, or its recent arrivals per
        higher-tier request by the rank test; for ``lower_surge``, its median arrivals within one holding time
        before the requests after its surge against before those apart from one, by the Poisson rate test (both
        are counts over one holding time)."""
        config = self.config
        first, second = (split.filter(pl.col("half") == half) for half in ("first", "second"))
        dropped = bool(split["dropped"].any())
        if comparison == "lower_surge":
            sides, rest = f"after a surge of tier {low['tier']}'s arrivals alone", "apart from one"
        else:
            loaded, calm = HALVES[comparison]
            sides, rest = f"in the {loaded} half, tier {low['tier']}'s load the higher", f"in the {calm}"
        latency = larger_values(
            f"tier {high['tier']}'s latency {sides} > {rest}",
            first["duration_ns"].to_numpy(),
            second["duration_ns"].to_numpy(),
            min_count=config.min_requests_per_half,
            min_effect_ratio=config.latency_growth_ratio,
            tries=tries * (1 + dropped),
        )
        suffered = latency
        if dropped:
            # Drops are a second look only where there are drops: without any, Fisher's test cannot reject.
            drops = larger_share(
                f"tier {high['tier']}'s dropped share {sides} > {rest}",
                (int(first["dropped"].sum()), first.height),
                (int(second["dropped"].sum()), second.height),
                min_count=config.min_requests_per_half,
                min_rise=config.drop_share_rise,
                tries=2 * tries,
            )
            suffered = min(latency, drops, key=_strength)
        if comparison == "lower_surge":
            holding = _holding_ns(lower)
            return (
                suffered,
                higher_rate(
                    f"tier {low['tier']}'s arrivals within its holding time before tier {high['tier']}'s requests "
                    "after its surge > apart from one",
                    round(float(np.median(_recent_arrivals(lower, first, holding)))),
                    round(float(np.median(_recent_arrivals(lower, second, holding)))),
                    min_count=config.surge_arrivals_min,
                    min_effect_ratio=config.volume_growth_ratio,
                    tries=2 * tries,
                ),
            )
        recent = _recent_arrivals(lower, split, _holding_ns(lower))
        rose = min(
            higher_rate(
                f"tier {low['tier']}'s arrivals in the {loaded} half of tier {high['tier']}'s time > in the {calm}",
                low["request_count_first"],
                low["request_count_second"],
                min_count=config.min_lower_requests,
                min_effect_ratio=config.volume_growth_ratio,
                tries=2 * tries,
            ),
            larger_values(
                f"tier {low['tier']}'s arrivals just before tier {high['tier']}'s requests, {loaded} half > {calm}",
                recent[split["half"].to_numpy() == "first"],
                recent[split["half"].to_numpy() == "second"],
                min_count=config.min_requests_per_half,
                min_effect_ratio=config.volume_growth_ratio,
                tries=2 * tries,
                quantile=None,
            ),
            key=_strength,
        )
        return (suffered, rose)


Candidate = tuple[str, dict[str, Any], dict[str, Any], pl.DataFrame, pl.DataFrame]
"""A pair compared one way: the comparison (:data:`COMPARISONS`), the higher tier's :func:`_halves` row, the lower
tier's row, the higher tier's requests with ``half`` and the lower tier's requests."""


def _candidates(
    requests: pl.DataFrame, rank: int, lower_rank: int, config: AdmissionTierStarvationConfig
) -> list[Candidate]:
    """The tier of ``rank`` against the tier of ``lower_rank`` by every comparison (:data:`COMPARISONS`) that has
    two sides."""
    candidates: list[Candidate] = []
    higher = requests.filter(pl.col("rank") == rank)
    lower = requests.filter(pl.col("rank") == lower_rank)
    others = requests.filter(pl.col("rank") != lower_rank)
    by_load = _by_load(higher, lower, others, config)
    (loaded,) = _halves(by_load)
    if min(loaded["request_count_first"], loaded["request_count_second"]) > 0:
        low = _lower_row(lower, by_load) | _others_growth(others, lower, by_load)
        low["lower_added"] = low["recent_second"] - low["recent_first"]
        candidates.append(("lower_surge", loaded, low, by_load, lower))
    lo, hi = int(higher["start_ns"].min()), int(higher["start_ns"].max())  # type: ignore[arg-type]
    in_range = requests.filter(pl.col("start_ns").is_between(lo, hi))
    for comparison, (loaded_half, _) in HALVES.items():
        by_time = {row["rank"]: row for row in _halves(_with_half(in_range, lo + hi, loaded_half))}
        halves = _with_half(higher, lo + hi, loaded_half)
        # _overlap needs a second side: a tier whose requests all started at once has none.
        if lower_rank not in by_time or halves["half"].n_unique() < 2:
            continue
        rest = [row for other, row in by_time.items() if other != lower_rank]
        low = by_time[lower_rank] | _overlap(lower, halves) | _others_growth_by_count(rest)
        low["lower_added"] = low["request_count_second"] - low["request_count_first"]
        candidates.append((comparison, by_time[rank], low, halves, lower))
    return candidates


def _pooled(requests: pl.DataFrame, ranks: list[int]) -> pl.DataFrame:
    """``requests`` with the tiers of ``ranks`` (sorted) as one: named theirs joined by ``+`` (``P0+P1``), ranked
    as the first. A lower tier's flood takes capacity from every tier above it; each of them alone may hold a
    handful of requests (the demo's six users: 13 P0 and 14 P1 requests in a 12 s window, whose halves' rank test
    reached p = 0.004 for an 8x slower P0 against a level of 0.0025), together twice as many."""
    if len(ranks) == 1:
        return requests
    inside = pl.col("rank").is_in(ranks)
    name = "+".join(requests.filter(inside).sort("rank")["tier"].unique(maintain_order=True).to_list())
    return requests.with_columns(
        pl.when(inside).then(pl.lit(name)).otherwise(pl.col("tier")).alias("tier"),
        pl.when(inside).then(pl.lit(ranks[0], pl.Int64)).otherwise(pl.col("rank")).alias("rank"),
    )


def _strength(test: EvidenceTest) -> tuple[bool, float]:
    """Sort key putting the stronger of two alternative tests first: evidence before none, then lower p."""
    return (not test.significant, test.p_value)


COMPARED_SIDES = ("first", "second")
"""The two sides of a comparison (the ``half`` column): before and after, or apart from a surge and after one."""

GROWTH_CAP = 1_000.0
"""Where a lower tier's load growth stops counting when pairs are ranked (growth from nothing is infinite)."""

HALVES = {"halves": ("second", "first"), "halves_receding": ("first", "second")}
"""The comparisons by halves of the higher tier's time range, by name: which half is the loaded side (``second`` in
the rows, where the lower tier's load must be the higher) and which the calm one (``first``). Where in a window a
flood sits is the window's accident: one that ends in the first half is the same starving as one that starts in
the second (the demo's flood and its backlog beside the CPU neighbour filled the first 11 s of a 15 s window)."""
COMPARISONS = (*HALVES, "lower_surge")
"""How a higher tier's requests are split in two: by :data:`HALVES`; ``lower_surge``, apart from a surge of the
lower tier's arrivals (``first``) and just after one (``second``)."""


@dataclass(frozen=True)
class _Starving:
    """A starving pair: the comparison (:data:`COMPARISONS`), the higher tier's :func:`_halves` row, the lower
    tier's row (counts and recent arrivals on each side), the higher tier's requests with ``half`` and the
    comparison's evidence."""

    comparison: str
    high: dict[str, Any]
    low: dict[str, Any]
    split: pl.DataFrame
    tests: tuple[EvidenceTest, ...]


def _by_load(
    higher: pl.DataFrame, lower: pl.DataFrame, others: pl.DataFrame, config: AdmissionTierStarvationConfig
) -> pl.DataFrame:
    """``higher`` with ``half``: ``second`` where ``lower``'s arrivals within its holding time before the
    request's start (:func:`_recent_arrivals`) surge while the ``others``' (every other tier's) arrivals in the same
    time do not, or the lower tier's surge outgrew theirs (:func:`_outgrew`), else ``first``. Arrivals surge when
    they reach ``surge_arrivals_min`` and ``volume_growth_ratio`` times their median over ``higher``'s requests (a
    surge, not the tier's usual traffic)."""
    window_ns = _holding_ns(lower)

    def surge(arrivals: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, float]:
        recent = _recent_arrivals(arrivals, higher, window_ns)
        usual = float(np.median(recent)) if recent.size else 0.0
        return recent >= max(config.surge_arrivals_min, config.volume_growth_ratio * usual), recent, usual

    lower_surging, lower_recent, lower_usual = surge(lower)
    others_surging, others_recent, _ = surge(others)
    outgrew = _outgrew(lower_recent - lower_usual, others_surging, others_recent, config.volume_growth_ratio)
    alone = pl.Series(lower_surging & outgrew)
    return higher.with_columns(pl.when(alone).then(pl.lit("second")).otherwise(pl.lit("first")).alias("half"))


def _outgrew(lower_added: Load, others_rose: Load, others_load: Load, growth_ratio: float) -> Any:
    """Whether the load the lower tier added (``lower_added``: its arrivals over its usual or calm side's, per
    request or for a whole side) is its own: the other tiers' arrivals did not rise beside it (``others_rose``
    false), or the lower tier added ``growth_ratio`` times as many arrivals as the other tiers brought in all
    (``others_load``, on the loaded side): the load is then mostly the lower tier's surge. The higher tiers' users
    all starting at once (a closed loop opening) bring a handful of arrivals beside a flood's dozens: the flood is no
    less the lower tier's (the demo's six users beside the stack's tier flood: 34 arrivals added against their 11);
    every tier bursting alike is not (the mooncake replay's interleaved tiers: 1-3 added against 3-6 brought)."""
    return np.logical_or(np.logical_not(others_rose), np.greater_equal(lower_added, growth_ratio * others_load))


Load = np.ndarray | float | bool
"""Added arrivals, or whether a tier's arrivals rose, per request (an array) or for a whole side (one value)."""


def _lower_row(lower: pl.DataFrame, split: pl.DataFrame) -> dict[str, Any]:
    """The lower tier's row for a comparison by load: its requests overlapping each side's higher-tier requests
    (``request_count_first`` / ``_second``) and :func:`_overlap`."""
    starts = lower["start_ns"].to_numpy()
    ends = starts + lower["duration_ns"].to_numpy()
    counts = {}
    for half in ("first", "second"):
        side = split.filter(pl.col("half") == half)
        side_starts = side["start_ns"].to_numpy()
        seen = mean_concurrency(side_starts, side_starts + side["duration_ns"].to_numpy(), starts, ends) > 0
        counts[f"request_count_{half}"] = int(seen.sum())
    return {"tier": lower["tier"][0], "rank": lower["rank"][0], **counts, **_overlap(lower, split)}


def _others_growth(others: pl.DataFrame, lower: pl.DataFrame, split: pl.DataFrame) -> dict[str, float]:
    """``others_growth``: how much the other tiers' arrivals within the lower tier's holding time before the
    higher tier's requests (``split``, with ``half``) grew, second side's mean over first's (+ 1 each, so a side
    without any counts); ``others_load``, the second side's mean."""
    recent = _recent_arrivals(others, split, _holding_ns(lower))
    side = split["half"].to_numpy()
    first, second = (
        float(recent[side == half].mean()) if (side == half).any() else 0.0 for half in ("first", "second")
    )
    return {"others_growth": (second + 1.0) / (first + 1.0), "others_load": second}


def _others_growth_by_count(rows: list[dict[str, Any]]) -> dict[str, float]:
    """``others_growth``: how much the other tiers' arrivals (their :func:`_halves` rows) grew from the first half
    to the second (counts + 1); ``others_load``, the second half's count."""
    first, second = (sum(row[f"request_count_{half}"] for row in rows) for half in ("first", "second"))
    return {"others_growth": (second + 1) / (first + 1), "others_load": float(second)}


def _title(comparison: str, high: dict[str, Any], low: dict[str, Any], volume_growth: float) -> str:
    """The finding's line: the higher tier's latency and drops on each side of the comparison, in time order."""
    if comparison == "halves":
        return (
            f"Tier {low['tier']} traffic grew {volume_growth:.1f}x while tier {high['tier']}'s latency went "
            f"{_change(high, 'first', 'second')}"
        )
    if comparison == "halves_receding":
        return (
            f"Tier {low['tier']} traffic was {volume_growth:.1f}x higher in the first half; as it fell, tier "
            f"{high['tier']}'s latency went {_change(high, 'second', 'first')}"
        )
    return (
        f"Tier {high['tier']}'s requests started after a surge of tier {low['tier']}'s "
        f"({low['recent_second']:.1f} arrivals within its holding time on average, against "
        f"{low['recent_first']:.1f}) went {_change(high, 'first', 'second')}"
    )


def _change(high: dict[str, Any], before: str, after: str) -> str:
    """The higher tier's median, p95 and dropped share from side ``before`` to side ``after`` of a comparison."""
    return (
        f"{high[f'latency_ms_p50_{before}']:.0f} -> {high[f'latency_ms_p50_{after}']:.0f} ms (p50), "
        f"{high[f'latency_ms_p95_{before}']:.0f} -> {high[f'latency_ms_p95_{after}']:.0f} ms (p95) and its drops "
        f"{high[f'dropped_share_{before}']:.0%} -> {high[f'dropped_share_{after}']:.0%}"
    )


_PER_TIER_EVIDENCE = {
    "tier_latency_ms_p50": "latency_ms_p50",
    "tier_latency_ms_p95": "latency_ms_p95",
    "tier_dropped_count": "dropped_count",
}
"""Evidence listing a :func:`tier_stats` column per tier (``"P0: 812.5"``), by the column."""


def _per_tier(stats: pl.DataFrame, column: str) -> list[str]:
    return [f"{tier}: {round(value, 1)}" for tier, value in stats.select("tier", column).iter_rows()]


def _overlap(lower: pl.DataFrame, higher: pl.DataFrame) -> dict[str, float]:
    """What the higher tier's requests (``higher``, with ``half``) met of the ``lower`` tier's: ``recent_first``
    / ``recent_second``, the lower tier's arrivals within its holding time before each higher-tier request
    (:func:`_recent_arrivals`), averaged over the half's requests; ``overlapping_second``, how many lower-tier
    requests overlapped a second-half one."""
    starts = lower["start_ns"].to_numpy()
    ends = starts + lower["duration_ns"].to_numpy()
    seen = higher.with_columns(pl.Series("recent", _recent_arrivals(lower, higher, _holding_ns(lower))))
    means = dict(seen.group_by("half").agg(pl.col("recent").mean()).iter_rows())
    second = higher.filter(pl.col("half") == "second")
    second_start = int(second["start_ns"].min())  # type: ignore[arg-type]
    second_end = int((second["start_ns"] + second["duration_ns"]).max())  # type: ignore[arg-type]
    overlapping = int(((starts < second_end) & (ends > second_start)).sum())
    return {
        "recent_first": float(means.get("first", 0.0)),
        "recent_second": float(means.get("second", 0.0)),
        "overlapping_second": overlapping,
    }


HOLDING_QUANTILE = 0.9
"""Quantile of a lower tier's latency taken as how long its arrivals hold capacity: a surge's backlog drains for
as long as its slowest requests wait, and the higher tier's requests queued behind it suffer that long."""


def _holding_ns(lower: pl.DataFrame) -> float:
    """How long the lower tier's arrivals hold capacity, ns: the :data:`HOLDING_QUANTILE` of its latency."""
    return float(lower["duration_ns"].quantile(HOLDING_QUANTILE, "linear") or 0.0)


def _recent_arrivals(arrivals: pl.DataFrame, higher: pl.DataFrame, window_ns: float) -> np.ndarray:
    """Per request of ``higher``, the ``arrivals`` (their starts) within ``window_ns`` before its start (one
    lower-tier holding time, :func:`_holding_ns`): the load it met, measured by what arrived, which a slow system
    does not inflate (requests in flight it does)."""
    starts = np.sort(arrivals["start_ns"].to_numpy())
    at = higher["start_ns"].to_numpy()
    window = int(window_ns)
    return (np.searchsorted(starts, at, side="right") - np.searchsorted(starts, at - window, side="left")).astype(float)


def _volume_growth(low: dict[str, Any]) -> float:
    """How much a lower tier's load grew from the first half to the second: the larger of its arrivals' growth
    (counts + 1) and the growth of its recent arrivals per higher-tier request (:func:`_overlap`; infinite
    from none)."""
    arrivals = (low["request_count_second"] + 1) / (low["request_count_first"] + 1)
    first, second = low["recent_first"], low["recent_second"]
    recent = second / first if first > 0 else (math.inf if second > 0 else 0.0)
    return max(arrivals, recent)


def _with_half(requests: pl.DataFrame, twice_middle: int, loaded: str = "second") -> pl.DataFrame:
    """``requests`` with ``half``: which side of a comparison by halves (:data:`HALVES`) each is on, ``second`` for
    the ``loaded`` half of time (``first``: a start at or before the middle, ``twice_middle / 2`` ns), else
    ``first``."""
    early = pl.col("start_ns") * 2 <= twice_middle
    sides = ("second", "first") if loaded == "first" else ("first", "second")
    return requests.with_columns(pl.when(early).then(pl.lit(sides[0])).otherwise(pl.lit(sides[1])).alias("half"))


def _latency_growth(halves: dict[str, Any]) -> float:
    """The larger growth, second half over first, of a tier's median and p95 latency (a :func:`_halves` row)."""
    return max(
        halves[f"latency_ms_{stat}_second"] / max(halves[f"latency_ms_{stat}_first"], 1e-6) for stat in ("p50", "p95")
    )


def _halves(requests: pl.DataFrame) -> list[dict[str, Any]]:
    """Per tier (by rank), :func:`tier_stats` of each half of ``requests`` (its ``half`` column: ``first`` or
    ``second``) side by side: ``<stat>_first`` and ``<stat>_second`` (a tier absent from a half has count 0 and
    null latency there)."""
    stats = tier_stats(requests, ("half",))
    rows: dict[str, dict[str, Any]] = {}
    for tier, rank in stats.select("tier", "rank").unique(maintain_order=True).iter_rows():
        rows[tier] = {"tier": tier, "rank": rank}
        for half in ("first", "second"):
            rows[tier] |= {
                f"request_count_{half}": 0,
                f"dropped_share_{half}": 0.0,
                f"latency_ms_p50_{half}": None,
                f"latency_ms_p95_{half}": None,
            }
    for row in stats.iter_rows(named=True):
        half = row["half"]
        rows[row["tier"]] |= {
            f"request_count_{half}": row["request_count"],
            f"dropped_share_{half}": row["dropped_share"],
            f"latency_ms_p50_{half}": row["latency_ms_p50"],
            f"latency_ms_p95_{half}": row["latency_ms_p95"],
        }
    return sorted(rows.values(), key=lambda row: (row["rank"], row["tier"]))
