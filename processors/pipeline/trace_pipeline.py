"""The trace pipeline: analyse each trace once it has gone quiet, store the derived rows, run the processors.

Flow of one poll (:meth:`TracePipeline.run_once`):

1. **Due traces**, from ClickHouse, not from process memory: ``hotspan_trace_arrivals`` (kept by a
   materialized view on ``otel_traces``, so it also sees what an OTel Collector writes) gives per (owner
   tenant, trace) the last arrival and the arrived span count. A trace is due when its last span arrived at
   least ``trace_idle_s`` ago and its arrived count differs from the count its stored summary covers: never
   analysed, or late spans since. A restarted (or second) Hotspan therefore finds the same work list.
2. **Batches** of up to ``batch_traces`` traces / ``batch_spans`` spans, oldest arrival first, split by owner
   tenant (a trace ID reused by another tenant is another trace). Per batch and tenant: one read of every
   span (:meth:`storage.reader.TraceReader.traces`), one :func:`analysis.analyze`, one rolling-threshold query,
   columnar row building, one insert per table; nothing runs per span in Python.
3. **Tail sampling** (with a :class:`~processors.pipeline.tail_sampling.TailSampler`): each trace analysed for
   the first time is kept or dropped by the policies, from its spans and its analysis.
4. **Writes**, in this order: span rows (``hotspan_span_analysis``) of kept traces, then each
   :class:`TraceProcessor` (on every trace, dropped ones included: the service graph and span metrics count
   them), then the summaries (``hotspan_trace_summary``, with the decision in ``Sampled``; each with the start of
   the trace's stored summary, which the poll read, so the store's copy sorted by start moves a trace whose start
   moved instead of counting it twice: ``storage.analysis_store.retractions``). Dropped traces' raw
   spans are deleted at the end of the poll, all batches together (a lightweight ``DELETE`` is a mutation that
   rewrites a mask of every part it touches, so fewer and larger ones cost less; at most
   :data:`DROP_CHUNK` traces each). The summary is the commit record: if anything before it fails, the batch stays
   due and is redone at the next poll. Rows carry a version (ns clock), and both tables are ReplacingMergeTree,
   so redoing a trace (after a failure or late spans) replaces its rows: idempotent. A deletion that fails
   after the summary leaves the trace's spans stored (sampling fails open: nothing is lost).

**Late spans of a dropped trace** (its stored summary says ``Sampled = false``, or the sampler's decision cache
does) are deleted by the poll that finds them, without analysing the fragment, and the summary's arrived count is
brought up to date; late spans of a kept trace have the whole trace analysed again, as without sampling. Stored
decisions are followed whether or not a sampler is configured, so turning sampling off never resurrects half a
trace.

Time: "quiet" is judged on the ClickHouse clock that stamps arrivals (no skew between hosts), unless a
``clock`` is given (tests). The worker remembers how far it has looked (a watermark, ``visibility_margin_s``
behind the idle cutoff) only to keep each poll's scan small; losing it (a restart) costs one full scan.

Scale-out: pipeline instances share the work by trace-ID hash (``shard`` of ``shards``); with one instance
(the default) it does all. A trace whose analysis raises is logged and skipped by this process until it
restarts, so one bad trace cannot stall the rest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import groupby

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from prometheus_client import CollectorRegistry, Counter

from analysis import TraceAnalysis, analyze
from analysis.periodic import PeriodicWorker
from processors.pipeline.base import TraceProcessor
from processors.pipeline.config import TracePipelineConfig
from processors.pipeline.derive import DerivedRows, derive_rows
from processors.pipeline.hotspots import hotspot_flags
from processors.pipeline.tail_sampling import TailSampler
from storage.analysis_store import AnalysisStore, PendingTrace
from storage.dependency_rollup import DependencyRollup
from storage.reader import TraceReader

log = logging.getLogger(__name__)

_NEVER_MS = 2**62
"""Cutoff of a forced run: every trace counts as quiet."""
_MAX_SKIPPED = 10_000
DROP_CHUNK = 5_000
"""Most traces one ``DELETE`` names: their IDs travel as one query parameter (in the URL, to a ClickHouse server)."""


class TracePipelineMetrics:
    """The trace pipeline's counters, registered in ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.skipped = Counter(
            "hotspan_trace_pipeline_skipped_traces",
            "Traces the trace pipeline gave up on (no summary, no derived rows) by reason: too_large (more arrived "
            "spans than HOTSPAN_MAX_TRACE_SPANS), unreadable (no span readable), analysis_failed (the log holds why).",
            ["reason"],
            registry=registry,
        )


@dataclass
class PollResult:
    """What one :meth:`TracePipeline.run_once` did.

    Attributes:
        analysed: traces analysed and recorded (a trace redone after late spans counts again).
        first_seen: of those, traces analysed for the first time.
        batches: batches processed (per owner tenant).
        skipped: traces given up on (their analysis raised, their spans could not be read, or too many).
        too_large: of those, traces with more arrived spans than ``config.max_trace_spans``.
        dropped: traces tail sampling dropped (their raw spans deleted) in this run.
        late_dropped: late spans deleted because their trace had been dropped before.
    """

    analysed: int = 0
    first_seen: int = 0
    batches: int = 0
    skipped: int = 0
    too_large: int = 0
    dropped: int = 0
    late_dropped: int = 0


class TracePipeline:
    """Polls for quiet traces and processes them (module docstring).

    Args:
        store: the pipeline's tables (``storage.analysis_store``).
        reader: where spans are read from.
        config: idle time, rule tables, batch sizes.
        processors: extensions run on every batch after the built-in analysis (:mod:`.base`), in order.
        sampler: tail sampling of newly analysed traces; None keeps every trace (still following decisions
            stored earlier for late spans).
        dependency_rollup: refreshed after a poll at most every ``config.dependency_refresh_s`` (not in a forced
            run); None (every shard but the first) leaves it to another instance.
        metrics: where skipped traces are counted; None counts them in :class:`PollResult` only.
        clock: seconds since the epoch; None judges idleness on the ClickHouse clock.
        shard, shards: this instance's share of the traces (``0 <= shard < shards``).

    Thread safety: :meth:`run_once` calls are serialised; :meth:`start`/:meth:`stop` manage one worker thread.
    """

    def __init__(
        self,
        store: AnalysisStore,
        reader: TraceReader,
        config: TracePipelineConfig,
        processors: Sequence[TraceProcessor] = (),
        *,
        sampler: TailSampler | None = None,
        dependency_rollup: DependencyRollup | None = None,
        metrics: TracePipelineMetrics | None = None,
        clock: Callable[[], float] | None = None,
        shard: int = 0,
        shards: int = 1,
    ) -> None:
        if not 0 <= shard < shards:
            raise ValueError(f"shard must be in [0, shards), got shard={shard} shards={shards}")
        self._store = store
        self._reader = reader
        self.config = config
        self._processors = list(processors)
        self._sampler = sampler
        self._rollup = dependency_rollup
        self._metrics = metrics
        self._rollup_due = 0.0
        # Per owner tenant: the trace IDs to delete at the end of the poll and the bounds of their span starts (ns).
        self._drops: dict[str, tuple[set[str], int, int]] = {}
        self._clock = clock
        self._shard, self._shards = shard, shards
        self._since_ms = 0
        self._skipped: dict[str, None] = {}
        self._run_lock = threading.Lock()
        # Storage outages fail one poll: logged; the work list is in ClickHouse, so the next poll resumes.
        self._worker = PeriodicWorker(
            self.run_once,
            lambda: self.config.interval_s,
            name="hotspan-trace-pipeline",
            log=log,
            failure="trace pipeline poll failed; retrying in %.1f s",
        )

    # --- running -----------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker thread: one :meth:`run_once` now and every ``config.interval_s`` after it."""
        self._worker.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the worker after its current batch; waits up to ``timeout_s``."""
        self._worker.stop(timeout_s)

    def run_once(self, *, force: bool = False) -> PollResult:
        """Process every due trace, batch after batch, until none is left (or :meth:`stop` is called).

        Args:
            force: treat every trace as quiet (``hotspan import`` runs this once the files are stored).

        Raises:
            Exception: what storage raises; batches finished before stay recorded.
        """
        with self._run_lock:
            result = PollResult()
            now_ms = int(self._clock() * 1000) if self._clock is not None else self._store.clock_ms()
            cutoff_ms = _NEVER_MS if force else now_ms - round(self.config.trace_idle_s * 1000)
            since_ms = 0 if force else self._since_ms
            done: set[tuple[str, str, int]] = set()
            try:
                while not self._worker.stopping or force:
                    pending = self._store.pending_traces(
                        cutoff_ms=cutoff_ms,
                        since_ms=since_ms,
                        limit=self.config.batch_traces,
                        skipped=list(self._skipped),
                        shard=self._shard,
                        shards=self._shards,
                    )
                    # A trace recorded in this run but still listed is receiving spans right now: leave it to
                    # the next poll rather than chase it.
                    pending = [p for p in pending if (p.tenant, p.trace_id, p.arrived_spans) not in done]
                    pending = self._drop_too_large(pending, result)
                    if not pending:
                        if not force:
                            margin_ms = round(self.config.visibility_margin_s * 1000)
                            self._since_ms = max(self._since_ms, cutoff_ms - margin_ms)
                        break
                    batch = self._take(pending)
                    self._process(batch, result)
                    done.update((p.tenant, p.trace_id, p.arrived_spans) for p in batch)
                if not force:
                    self._refresh_rollup()
            finally:
                # Batches recorded before a failure still lose their dropped traces' spans.
                for owner in list(self._drops):
                    self._flush_drops(owner)
            return result

    def _refresh_rollup(self) -> None:
        """Refresh the dependency rollup when one is due; a failure is logged: reads fall back to the raw spans for
        the minutes it would have recomputed, and the next refresh takes them."""
        if self._rollup is None or time.monotonic() < self._rollup_due:
            return
        self._rollup_due = time.monotonic() + self.config.dependency_refresh_s
        try:
            self._rollup.refresh()
        except Exception:
            log.exception("dependency rollup refresh failed; retrying in %.0f s", self.config.dependency_refresh_s)

    def _drop_too_large(self, pending: list[PendingTrace], result: PollResult) -> list[PendingTrace]:
        """``pending`` without the traces over ``config.max_trace_spans``, which are skipped (bounded memory)."""
        limit = self.config.max_trace_spans
        large = {p.trace_id for p in pending if p.arrived_spans > limit}
        if not large:
            return pending
        log.warning(
            "trace pipeline: %d trace(s) have more than %d spans (HOTSPAN_MAX_TRACE_SPANS); not analysed",
            len(large),
            limit,
        )
        result.too_large += len(large)
        self._skip(large, result, "too_large")
        return [p for p in pending if p.trace_id not in large]

    def _take(self, pending: list[PendingTrace]) -> list[PendingTrace]:
        """The longest prefix of ``pending`` within ``batch_spans`` (at least one trace)."""
        taken, spans = [], 0
        for trace in pending:
            if taken and spans + trace.arrived_spans > self.config.batch_spans:
                break
            taken.append(trace)
            spans += trace.arrived_spans
        return taken

    # --- one batch ---------------------------------------------------------------------------------------------

    def _process(self, batch: list[PendingTrace], result: PollResult) -> None:
        version = time.time_ns()
        for owner, group in groupby(sorted(batch, key=lambda p: p.tenant), key=lambda p: p.tenant):
            traces = list(group)
            arrived = {p.trace_id: p.arrived_spans for p in traces}
            spans = self._reader.traces(list(arrived), tenant=owner)
            decided = self._decided(owner, list(arrived))
            first_seen = set(arrived) - set(decided)
            late = [trace_id for trace_id, keep in decided.items() if not keep]
            spans = self._drop_late(owner, spans, late, arrived, version, result)
            unread = set(arrived) - set(late) - set(spans["trace_id"].unique().to_list())
            if unread:
                # Arrived but gone (TTL) or unreadable: retrying every poll would never succeed.
                log.warning("trace pipeline: no spans readable for %d trace(s), skipping them", len(unread))
                self._skip(unread, result, "unreadable")
            if not spans.height:
                continue
            rolling = self._rolling_thresholds(spans, owner)
            analysable = {trace_id: count for trace_id, count in arrived.items() if trace_id not in late}
            analysed = self._analyse(spans, owner, analysable, version, rolling, result)
            if analysed is None:
                continue
            spans, analysis, rows = analysed
            kept = set(spans["trace_id"].unique().to_list())
            decisions = self._decide(owner, spans, rows, first_seen & kept)
            dropped = [trace_id for trace_id, keep in decisions.items() if not keep]
            self._store.write_span_analysis(_without(rows.spans, dropped))
            for processor in self._processors:
                processor.process(spans, analysis, first_seen & kept, frozenset(dropped))
            stored = {(owner, p.trace_id): p.summary_start_ns for p in traces if p.summary_start_ns is not None}
            self._store.write_trace_summaries(_marked_dropped(rows.summaries, dropped), stored)
            self._drop(owner, spans.filter(pl.col("trace_id").is_in(dropped)))
            if self._sampler is not None:
                self._sampler.remember(owner, decisions)
            result.batches += 1
            result.analysed += rows.summaries.num_rows
            result.first_seen += len(first_seen & kept)
            result.dropped += len(dropped)

    def _decided(self, owner: str, trace_ids: list[str]) -> dict[str, bool]:
        """Per trace of ``trace_ids`` decided before (summarised), True when kept: from the sampler's cache, else
        from the stored summaries (cached then). Absent: never analysed."""
        cached = self._sampler.remembered(owner, trace_ids) if self._sampler is not None else {}
        missing = [trace_id for trace_id in trace_ids if trace_id not in cached]
        stored = self._store.summarised(owner, missing) if missing else {}
        if self._sampler is not None:
            self._sampler.remember(owner, stored)
        return cached | stored

    def _drop_late(
        self,
        owner: str,
        spans: pl.DataFrame,
        late: list[str],
        arrived: dict[str, int],
        version: int,
        result: PollResult,
    ) -> pl.DataFrame:
        """Delete the (late) spans of ``late``, traces dropped before, and record their arrived counts (also when
        none is readable: they were deleted with their trace while arriving); returns the other traces' spans."""
        if not late:
            return spans
        fragments = spans.filter(pl.col("trace_id").is_in(late))
        self._drop(owner, fragments)
        self._store.refresh_summaries(owner, {trace_id: arrived[trace_id] for trace_id in late}, version)
        result.late_dropped += fragments.height
        if self._sampler is not None:
            self._sampler.count_late_dropped(fragments.height)
        return spans.filter(~pl.col("trace_id").is_in(late))

    def _drop(self, owner: str, spans: pl.DataFrame) -> None:
        """Have the stored spans of the traces in ``spans`` deleted at the end of the poll (or now, once
        :data:`DROP_CHUNK` traces wait), bounded by their start times so the delete skips what cannot hold them."""
        if not spans.height:
            return
        trace_ids, start_ns, end_ns = self._drops.get(owner, (set(), 2**63 - 1, -(2**63)))
        trace_ids.update(spans["trace_id"].unique().to_list())
        starts = spans["start_time_unix_nano"]
        self._drops[owner] = (trace_ids, min(start_ns, int(starts.min())), max(end_ns, int(starts.max())))
        if len(trace_ids) >= DROP_CHUNK:
            self._flush_drops(owner)

    def _flush_drops(self, owner: str) -> None:
        trace_ids, start_ns, end_ns = self._drops.pop(owner)
        self._store.drop_traces(owner, sorted(trace_ids), start_ns, end_ns)

    def _decide(self, owner: str, spans: pl.DataFrame, rows: DerivedRows, first_seen: set[str]) -> dict[str, bool]:
        """The sampler's decisions on the traces seen for the first time (every one kept without a sampler)."""
        if self._sampler is None or not first_seen:
            return {}
        summaries = pl.from_arrow(rows.summaries.select(["TraceId", "SpanCount", "HotspotCount", "RequestTenant"]))
        assert isinstance(summaries, pl.DataFrame)
        summaries = summaries.rename(
            {
                "TraceId": "trace_id",
                "SpanCount": "span_count",
                "HotspotCount": "hotspot_count",
                "RequestTenant": "request_tenant",
            }
        ).filter(pl.col("trace_id").is_in(list(first_seen)))
        return self._sampler.decide(owner, spans.filter(pl.col("trace_id").is_in(list(first_seen))), summaries)

    def _analyse(
        self,
        spans: pl.DataFrame,
        owner: str,
        arrived: dict[str, int],
        version: int,
        rolling: pl.DataFrame | None,
        result: PollResult,
    ) -> tuple[pl.DataFrame, TraceAnalysis, DerivedRows] | None:
        """Analyse a tenant's batch (pure work, no I/O); when that raises, each trace alone, skipping those that
        still raise.

        Returns:
            The spans actually analysed, their analysis and rows; None when no trace could be analysed.
        """
        try:
            return spans, *self._derive(spans, owner, arrived, version, rolling)
        except Exception:
            log.exception("trace pipeline: analysing a batch of %d trace(s) failed; retrying one by one", len(arrived))
        good = []
        for trace_id in arrived:
            try:
                self._derive(spans.filter(pl.col("trace_id") == trace_id), owner, arrived, version, rolling)
                good.append(trace_id)
            except Exception:
                log.exception("trace pipeline: trace %s cannot be analysed; skipping it", trace_id)
                self._skip({trace_id}, result, "analysis_failed")
        if not good:
            return None
        kept = spans.filter(pl.col("trace_id").is_in(good))
        return kept, *self._derive(kept, owner, arrived, version, rolling)

    def _derive(
        self, spans: pl.DataFrame, owner: str, arrived: dict[str, int], version: int, rolling: pl.DataFrame | None
    ) -> tuple[TraceAnalysis, DerivedRows]:
        analysis = analyze(spans, self.config.stage_rules)
        tree = analysis.tree
        durations = tree.spans.select(
            "service_name", "name", "attributes", pl.Series("duration_ns", tree.end_ns - tree.start_ns)
        )
        flags = hotspot_flags(durations, self.config.hotspot_rules, rolling)
        return analysis, derive_rows(analysis, owner, flags, arrived, version)

    def _rolling_thresholds(self, spans: pl.DataFrame, owner: str) -> pl.DataFrame | None:
        """Per (service, operation) of the batch, the rolling quantile of durations over the window before the
        batch's newest span start (data time, so imported history is judged against its own past)."""
        rolling = self.config.hotspot_rules.rolling
        if not rolling.enabled or not spans.height:
            return None
        end_ns = int(spans["start_time_unix_nano"].max())
        return self._store.duration_quantiles(
            spans["service_name"].unique().to_list(),
            end_ns - round(self.config.hotspot_window_s * 1e9),
            end_ns,
            rolling.quantile,
            rolling.min_samples,
            tenant=owner,
        )

    def _skip(self, trace_ids: set[str], result: PollResult, reason: str) -> None:
        result.skipped += len(trace_ids)
        if self._metrics is not None:
            self._metrics.skipped.labels(reason).inc(len(trace_ids))
        self._skipped.update(dict.fromkeys(sorted(trace_ids)))
        # Bounded, so the skip list stays a small query parameter; the oldest entries are retried.
        while len(self._skipped) > _MAX_SKIPPED:
            del self._skipped[next(iter(self._skipped))]


def _without(rows: pa.Table, trace_ids: list[str]) -> pa.Table:
    """``rows`` (a table with ``TraceId``) less those of ``trace_ids``."""
    if not trace_ids:
        return rows
    return rows.filter(pc.invert(pc.is_in(rows.column("TraceId"), pa.array(trace_ids, pa.string()))))


def _marked_dropped(summaries: pa.Table, trace_ids: list[str]) -> pa.Table:
    """``summaries`` with ``Sampled`` false for ``trace_ids``."""
    if not trace_ids:
        return summaries
    sampled = pc.invert(pc.is_in(summaries.column("TraceId"), pa.array(trace_ids, pa.string())))
    return summaries.set_column(summaries.schema.get_field_index("Sampled"), "Sampled", sampled)
