"""Tail sampling: keep or drop each whole trace once it is quiet, by the policies of
:mod:`processors.pipeline.tail_sampling_policies`.

The trace pipeline (:class:`processors.pipeline.trace_pipeline.TracePipeline`) asks :meth:`TailSampler.decide` about the
traces it analyses for the first time, after its analysis (so the ``hotspot`` policy can read the analysis's
flags) and before it writes anything; it stores the decision in the trace's summary (``Sampled``), deletes the raw
spans of a dropped trace after the processors (service graph, span metrics) have counted them, and tells the
sampler with :meth:`TailSampler.remember` once the decision is stored. RED rollups count spans at insert, before
any of this, so every metric covers dropped traces too.

**Late spans** follow the decision of their trace: :meth:`TailSampler.remembered` answers from a bounded in-memory
cache of decisions (``decision_cache``: least recently used forgotten first, one size for kept and one for dropped
traces, as the Collector's), and the pipeline reads the stored decision for a trace the cache has forgotten (after
a restart, or on another instance), so a late span never starts a new decision for a trace decided before.

**Metrics** (``/metrics``, registered by :class:`TailSamplingMetrics`):

==================================================  ================================================================
``hotspan_tail_sampling_decisions_total``           policy, decision (``keep``/``drop``): each top-level policy's
                                                    vote on each trace decided
``hotspan_tail_sampling_traces_total``              decision: the final decision (kept when any policy keeps)
``hotspan_tail_sampling_late_spans_dropped_total``  spans that arrived after their trace was dropped (deleted)
==================================================  ================================================================

Thread safety: the pipeline calls it from one thread; the cache and the rate limits take a lock anyway, so
a second caller cannot corrupt them.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping

import numpy as np
import polars as pl
from prometheus_client import CollectorRegistry, Counter

from analysis.spans import attribute
from hotspan_sdk.consistent import MIN_PROBABILITY, threshold_for_probability
from processors.pipeline.tail_sampling_policies import (
    AlwaysSamplePolicy,
    AndPolicy,
    HotspotPolicy,
    LatencyPolicy,
    LeafPolicy,
    Policy,
    ProbabilisticPolicy,
    RateLimitingPolicy,
    StatusCodePolicy,
    StringAttributePolicy,
    TailSamplingConfig,
)

KEEP, DROP = "keep", "drop"
"""Label values of ``decision``."""

_MS = 1_000_000


class TailSamplingMetrics:
    """The tail-sampling counters (module docstring), registered in ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.decisions = Counter(
            "hotspan_tail_sampling_decisions",
            "Tail-sampling votes of each top-level policy on each trace decided.",
            ["policy", "decision"],
            registry=registry,
        )
        self.traces = Counter(
            "hotspan_tail_sampling_traces",
            "Traces decided by tail sampling: kept when any policy keeps them.",
            ["decision"],
            registry=registry,
        )
        self.late_spans_dropped = Counter(
            "hotspan_tail_sampling_late_spans_dropped",
            "Spans that arrived after their trace was dropped by tail sampling, deleted in turn.",
            registry=registry,
        )


class DecisionCache:
    """Recent decisions per (owner tenant, trace ID): two LRU maps, ``sampled_size`` kept and ``non_sampled_size``
    dropped traces (0 remembers none of that kind). Thread-safe."""

    def __init__(self, sampled_size: int, non_sampled_size: int) -> None:
        self._maps = {True: OrderedDict[tuple[str, str], None](), False: OrderedDict[tuple[str, str], None]()}
        self._sizes = {True: sampled_size, False: non_sampled_size}
        self._lock = threading.Lock()

    def get(self, owner: str, trace_id: str) -> bool | None:
        """The remembered decision (True: kept), refreshed as most recently used; None when not remembered."""
        key = (owner, trace_id)
        with self._lock:
            for keep, entries in self._maps.items():
                if key in entries:
                    entries.move_to_end(key)
                    return keep
        return None

    def put(self, owner: str, trace_id: str, keep: bool) -> None:
        """Remember a decision, forgetting the least recently used one of its kind beyond the size."""
        key = (owner, trace_id)
        with self._lock:
            self._maps[not keep].pop(key, None)
            entries = self._maps[keep]
            entries[key] = None
            entries.move_to_end(key)
            while len(entries) > self._sizes[keep]:
                entries.popitem(last=False)


class _Batch:
    """What the policies read about one batch's traces, in ``trace_ids`` order."""

    def __init__(self, owner: str, spans: pl.DataFrame, summaries: pl.DataFrame) -> None:
        self.owner = owner
        self.order = summaries.select("trace_id")
        self.trace_ids: list[str] = summaries["trace_id"].to_list()
        self.summaries = summaries
        self.spans = spans

    def any_span(self, condition: pl.Expr) -> np.ndarray:
        """Per trace, whether some span meets ``condition``."""
        hits = self.spans.group_by("trace_id").agg(condition.fill_null(False).any().alias("hit"))
        joined = self.order.join(hits, on="trace_id", how="left", maintain_order="left")
        return joined["hit"].fill_null(False).to_numpy()

    def durations_ns(self) -> np.ndarray:
        """Per trace, latest span end minus earliest span start (ns)."""
        bounds = self.spans.group_by("trace_id").agg(
            (pl.col("end_time_unix_nano").max() - pl.col("start_time_unix_nano").min()).alias("duration_ns")
        )
        joined = self.order.join(bounds, on="trace_id", how="left", maintain_order="left")
        return joined["duration_ns"].fill_null(0).to_numpy()


class TailSampler:
    """Decides which traces to keep (module docstring).

    Args:
        config: the policies and the decision cache's sizes.
        metrics: where decisions are counted; None counts nowhere (``hotspan import``).
        clock: seconds since the epoch, for ``rate_limiting``'s current second (tests pass their own).
    """

    def __init__(
        self,
        config: TailSamplingConfig,
        metrics: TailSamplingMetrics | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self._metrics = metrics
        self._clock = clock
        sizes = config.decision_cache
        self.cache = DecisionCache(sizes.sampled_cache_size, sizes.non_sampled_cache_size)
        # Per (policy name, owner tenant, request tenant): (second, spans kept in it).
        self._spent: dict[tuple[str, str, str], tuple[int, int]] = {}
        self._rate_lock = threading.Lock()

    def remembered(self, owner: str, trace_ids: Iterable[str]) -> dict[str, bool]:
        """The cached decisions among ``trace_ids`` of owner ``owner`` (True: kept); the rest are absent."""
        found = {trace_id: self.cache.get(owner, trace_id) for trace_id in trace_ids}
        return {trace_id: keep for trace_id, keep in found.items() if keep is not None}

    def remember(self, owner: str, decisions: Mapping[str, bool]) -> None:
        """Cache decisions once they are stored (or read from storage on a cache miss)."""
        for trace_id, keep in decisions.items():
            self.cache.put(owner, trace_id, keep)

    def decide(self, owner: str, spans: pl.DataFrame, summaries: pl.DataFrame) -> dict[str, bool]:
        """Decide the traces of ``summaries`` (one row per trace: ``trace_id``, ``span_count``, ``hotspot_count``,
        ``request_tenant``) from their ``spans`` (the reader's columns: ``trace_id``, ``status_code``,
        ``attributes``, optionally ``resource_attributes``, ``start_time_unix_nano``, ``end_time_unix_nano`` ns),
        all of owner tenant ``owner``. Counts the votes; caches nothing (:meth:`remember` does, once stored).

        Returns:
            Trace ID → True to keep, False to drop.
        """
        # Trace-ID order, so a rate limit spends its budget the same way on every run of the same batch.
        batch = _Batch(owner, spans, summaries.sort("trace_id"))
        everyone = np.ones(len(batch.trace_ids), dtype=bool)
        keep = np.zeros(len(batch.trace_ids), dtype=bool)
        for policy in self.config.policies:
            votes = self._evaluate(policy, batch, everyone)
            keep |= votes
            self._count(self._metrics.decisions.labels(policy.name, KEEP) if self._metrics else None, votes.sum())
            self._count(self._metrics.decisions.labels(policy.name, DROP) if self._metrics else None, (~votes).sum())
        if self._metrics is not None:
            self._count(self._metrics.traces.labels(KEEP), keep.sum())
            self._count(self._metrics.traces.labels(DROP), (~keep).sum())
        return dict(zip(batch.trace_ids, keep.tolist(), strict=True))

    def count_late_dropped(self, spans: int) -> None:
        """Count ``spans`` late spans deleted because their trace had been dropped."""
        if self._metrics is not None:
            self._count(self._metrics.late_spans_dropped, spans)

    @staticmethod
    def _count(counter: Counter | None, amount: int) -> None:
        if counter is not None and amount:
            counter.inc(int(amount))

    # --- policies ----------------------------------------------------------------------------------------------

    def _evaluate(self, policy: Policy, batch: _Batch, candidates: np.ndarray) -> np.ndarray:
        """Per trace, whether ``policy`` keeps it; only ``candidates`` are considered (False elsewhere)."""
        if isinstance(policy, AndPolicy):
            kept = candidates.copy()
            for sub_policy in policy.and_.and_sub_policy:
                kept = self._evaluate(sub_policy, batch, kept)
            return kept
        if isinstance(policy, RateLimitingPolicy):
            return self._rate_limited(policy, batch, candidates)
        return _stateless(policy, batch) & candidates

    def _rate_limited(self, policy: RateLimitingPolicy, batch: _Batch, candidates: np.ndarray) -> np.ndarray:
        """The Collector's rule per tenant: a trace is kept when the spans kept in the current second plus its own
        stay within ``spans_per_second``. One Python step per candidate trace (not per span)."""
        limit = policy.rate_limiting.spans_per_second
        second = int(self._clock())
        span_counts = batch.summaries["span_count"].to_list()
        tenants = batch.summaries["request_tenant"].fill_null("").to_list()
        kept = np.zeros(len(candidates), dtype=bool)
        with self._rate_lock:
            for index in np.flatnonzero(candidates):
                key = (policy.name, batch.owner, tenants[index])
                at, spent = self._spent.get(key, (second, 0))
                if at != second:
                    spent = 0
                if spent + span_counts[index] <= limit:
                    kept[index] = True
                    spent += span_counts[index]
                self._spent[key] = (second, spent)
        return kept


def _stateless(policy: LeafPolicy, batch: _Batch) -> np.ndarray:
    """Per trace, whether a policy without state keeps it."""
    size = len(batch.trace_ids)
    if isinstance(policy, AlwaysSamplePolicy):
        return np.ones(size, dtype=bool)
    if isinstance(policy, StatusCodePolicy):
        status = pl.col("status_code").str.to_uppercase().str.replace(r"^STATUS_CODE_", "")
        return batch.any_span(status.is_in(policy.status_code.status_codes))
    if isinstance(policy, LatencyPolicy):
        durations = batch.durations_ns()
        spec = policy.latency
        kept = durations >= spec.threshold_ms * _MS
        if spec.upper_threshold_ms is not None:
            kept &= durations <= spec.upper_threshold_ms * _MS
        return kept
    if isinstance(policy, HotspotPolicy):
        return batch.summaries["hotspot_count"].to_numpy() >= policy.hotspot.min_spans
    if isinstance(policy, StringAttributePolicy):
        spec = policy.string_attribute
        columns = [name for name in ("attributes", "resource_attributes") if name in batch.spans.columns]
        matches = [_matches(attribute(spec.key, name), spec.values, spec.enabled_regex_matching) for name in columns]
        return batch.any_span(pl.any_horizontal(matches))
    if isinstance(policy, ProbabilisticPolicy):
        return _probabilistic(batch.trace_ids, policy.probabilistic.sampling_percentage)
    raise TypeError(f"unknown tail-sampling policy {policy!r}")


def _matches(value: pl.Expr, values: list[str], regex: bool) -> pl.Expr:
    if not regex:
        return value.is_in(values)
    return value.str.contains("|".join(f"(?:{pattern})" for pattern in values))


def _probabilistic(trace_ids: list[str], percentage: float) -> np.ndarray:
    """Kept when the trace ID's low 56 bits (its randomness, W3C Trace Context Level 2) reach the rejection threshold
    of ``percentage`` % (``hotspan_sdk.consistent``): the same answer on every node, and a subset of what a
    higher percentage keeps."""
    probability = percentage / 100
    if probability < MIN_PROBABILITY:
        return np.zeros(len(trace_ids), dtype=bool)
    threshold = threshold_for_probability(probability)
    randomness = pl.Series(trace_ids, dtype=pl.String).str.slice(-14).str.to_integer(base=16, strict=False)
    return (randomness.fill_null(-1) >= threshold).to_numpy()
