"""One trace as every reader shows it: the one server-side model the trace page and the trace-view API read.

A :class:`TraceView` is built from **one** read of a trace's spans and **one**
:class:`analysis.TraceAnalysis` of them; every part of the trace page (tree, timeline, critical path, stage bar,
span detail, flame graph) reads it, so none of them can disagree with another or read the trace again.

- **Tree**: the spans as they report it (``TraceAnalysis.reported_tree``): a span is drawn under the parent
  it names. The analysis tree (``TraceAnalysis.tree``) has the adjusters applied (a wrapper adopting its sibling
  work, a server span lifted or shifted against clock skew, :mod:`analysis.wrappers`,
  :mod:`analysis.remote_spans`); every number shown (self time, critical path, stages) comes from it, and
  the spans it moved are marked (:attr:`TraceView.adjustment`).
- **Rows**: depth-first over the reported tree, the trace's root first, other roots (orphans, broken links)
  after it by start, siblings by start. Each span's subtree is one contiguous run of rows
  (``row[i]`` to ``end_row[i]``), which is what makes collapsing and aggregation linear-time
  (:mod:`query.trace_rows`).
- **Times**: the analysis tree's (clock-skew shifts applied, as Jaeger's adjuster shows them), Int64 ns since
  the epoch; :attr:`TraceView.start_ns` is the trace's first instant.
- **Critical path of the whole trace**: Jaeger UI's walk (:mod:`analysis.critical_path`) over the analysis tree,
  each span's interval first widened to cover its subtree. The analysis tree keeps the request's work whole
  however early the spans above it ended (:mod:`analysis.spawned_tasks`), but leaves out work started after the
  request's window ended, which Jaeger cuts to its parent; widened, the path and the stage bar cover that too.
  Where no span lies past its parent the widened tree is the tree and the path is the request's exactly. A
  section outside its span's own interval is time the span waits on nothing it traced: untraced
  (:data:`UNTRACED`).

Memory: a few aligned numpy arrays per span plus the span frame itself (polars); no Python object per span, so
a million-span trace costs some hundred MB, computed in vectorised passes (no recursion, no per-span loop).
Parts only some readers need (model calls, the stage lane, the minimap, sibling groups) are computed on first
use and kept. Not thread-safe while those are first computed; callers that share a view
(:class:`query.trace_view_cache.TraceViews`) read it under their own lock.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import numpy.typing as npt
import polars as pl

from analysis import STAGES, TraceAnalysis, analyze, data_quality, request_summary, stage_breakdown
from analysis.agent_graph import agent_graph
from analysis.ancestry import BoolArray, IntArray, reduce_subtrees, reduce_to_root
from analysis.critical_path import Sections, critical_path_sections, own_critical_ns
from analysis.model_calls import model_calls
from analysis.ordering import whole_sums
from analysis.stage_rules import StageRules
from analysis.tree import ADJUSTMENTS, ROOT_REASONS

UNTRACED = -1
"""Stage code of critical-path time outside its span's own interval (:class:`StageLane`)."""
MINIMAP_BUCKETS = 240
"""Row buckets of the minimap (each a horizontal line from its spans' first start to last end)."""


@dataclass(frozen=True)
class StageLane:
    """Where the trace's time went, along its whole duration: the critical path of the whole trace (module
    docstring) of every root, each part with its span's stage (vLLM spans and untraced LLM calls cut into their
    pieces, :class:`analysis.stages.Pieces`), or :data:`UNTRACED` outside the span's own interval.

    Attributes:
        start_ns, end_ns: parts by start, ns since the epoch, each of positive length; runs of touching parts
            of one stage merged. Parts of different roots may overlap (:attr:`overlapping`); time no part
            covers is covered by no root span.
        stage: per part, an index into :data:`analysis.STAGES`, or :data:`UNTRACED`.
        totals_ns: ns per stage of :data:`analysis.STAGES` on the roots' critical paths (parallel roots both
            count).
        untraced_ns: ns of critical path outside its spans' own intervals.
        waiting_ns: ns of the trace's duration on no span's traced time: :attr:`untraced_ns`, and the time no
            root's path covers. With one root (or roots one after another) ``totals_ns.sum() + waiting_ns`` is the
            trace's duration; roots running at once count their shared time once per root in ``totals_ns``.
        overlapping: some parts overlap (roots running at once).
    """

    start_ns: IntArray
    end_ns: IntArray
    stage: IntArray
    totals_ns: IntArray
    untraced_ns: int
    waiting_ns: int
    overlapping: bool

    @property
    def dominant(self) -> str | None:
        """The stage with the most time, None for a trace with no time."""
        return STAGES[int(np.argmax(self.totals_ns))] if self.totals_ns.sum() > 0 else None


@dataclass(frozen=True)
class Minimap:
    """The whole trace in :data:`MINIMAP_BUCKETS` bands of consecutive rows (display order).

    Attributes:
        start_ns, end_ns: per band, its spans' first start and last end (ns since the epoch).
        service: per band, the service code (:attr:`TraceView.services`) of its longest span.
        rows: per band, how many rows it holds.
    """

    start_ns: IntArray
    end_ns: IntArray
    service: IntArray
    rows: IntArray


@dataclass(frozen=True)
class Groups:
    """Repeated siblings: the spans sharing one reported parent, service and name form a group.

    Attributes:
        group: per span, its group number.
        size: per group, its spans.
        leader: per group, its first span in display order (the row an aggregate stands on).
        start_ns, end_ns: per group, its spans' first start and last end.
        total_ns: per group, its spans' summed duration.
        errors: per group, its spans with status ``Error``.
        offsets, members: group ``g``'s spans, by start, are ``members[offsets[g]:offsets[g + 1]]``.
    """

    group: IntArray
    size: IntArray
    leader: IntArray
    start_ns: IntArray
    end_ns: IntArray
    total_ns: IntArray
    errors: IntArray
    offsets: IntArray
    members: IntArray


class TraceView:
    """One trace's view (module docstring). Arrays are aligned with ``analysis.tree.spans`` (span index ``i``)
    unless their name says rows.

    Args:
        trace_id: the trace (32 lowercase hex).
        analysis: the analysis of exactly the spans read (the whole trace, or its first spans by start when it
            was larger than the read's bound).
        stored_spans: spans the store holds for the trace; default (or anything smaller) the spans read.
        operations: for a trace read in part, the whole trace by operation as
            ``storage.reader.TraceReader.trace_operations`` sums it; None when the view holds the whole trace.

    Raises:
        ValueError: ``analysis`` holds no spans, or more than one trace.
    """

    def __init__(
        self,
        trace_id: str,
        analysis: TraceAnalysis,
        stored_spans: int | None = None,
        operations: pl.DataFrame | None = None,
    ) -> None:
        reported = analysis.reported_tree
        if reported.size == 0 or reported.trace_count != 1:
            raise ValueError(f"a trace view needs the spans of one trace, got {reported.trace_count} traces")
        self.trace_id = trace_id
        self.analysis = analysis
        tree = analysis.tree
        self.spans: pl.DataFrame = tree.spans
        self.parent: IntArray = reported.parent
        """The parent each span names (span index, -1 for a root), as drawn."""
        self.depth: IntArray = reported.depth
        """Ancestors in the drawn tree (0 for a root)."""
        self.stored_spans = max(stored_spans or 0, self.spans.height)
        """Spans the store holds for the trace; more than :attr:`size` when only its first spans were read."""
        self.operations = operations
        """The whole trace by operation (``service_name``, ``name``, ``span_count``, ``duration_ns_sum``,
        ``duration_ns_max``, ``error_count``, ``first_start_ns``) when only its first spans were read; else None."""
        self.span_start_ns: IntArray = tree.start_ns
        self.span_end_ns: IntArray = tree.end_ns
        self.start_ns = int(tree.start_ns.min())
        self.end_ns = int(tree.end_ns.max())
        self.order, self.row, self.end_row = _display_order(self.parent, self.depth, int(tree.primary_root[0]))
        self._last_search: tuple[str, IntArray] | None = None

    @property
    def size(self) -> int:
        """Spans in the trace (duplicates of one span ID counted once, the last copy kept)."""
        return self.spans.height

    @property
    def truncated(self) -> bool:
        """Whether the view holds only the trace's first spans by start (the store holds more)."""
        return self.stored_spans > self.size

    @property
    def duration_ns(self) -> int:
        """From the first span's start to the last span's end, ns."""
        return self.end_ns - self.start_ns

    @property
    def primary_root(self) -> int:
        """The trace's root span (:attr:`analysis.tree.SpanTree.primary_root`)."""
        return int(self.analysis.tree.primary_root[0])

    @cached_property
    def services(self) -> tuple[str, ...]:
        """The trace's services, sorted; :attr:`service` indexes it."""
        return tuple(self.spans["service_name"].fill_null("").unique().sort().to_list())

    @cached_property
    def service(self) -> IntArray:
        """Per span, its service's index in :attr:`services`."""
        names = self.spans["service_name"].fill_null("").cast(pl.Enum(self.services))
        return names.to_physical().to_numpy().astype(np.int64)

    @cached_property
    def error(self) -> BoolArray:
        """Spans whose status is ``Error``."""
        if "status_code" not in self.spans.columns:
            return np.zeros(self.size, dtype=bool)
        return (self.spans["status_code"] == "Error").fill_null(False).to_numpy()

    @cached_property
    def duration(self) -> IntArray:
        """Per span, its duration in ns (analysis tree times)."""
        return self.span_end_ns - self.span_start_ns

    @property
    def self_ns(self) -> IntArray:
        """Per span, ns of its interval no (analysis) child covers: its own, untraced time."""
        return self.analysis.self_time_ns

    @property
    def stage(self) -> IntArray:
        """Per span, its stage (index into :data:`analysis.STAGES`; a split span shows its rule's stage, its
        pieces carry the phases)."""
        return self.analysis.assignment.stage

    @cached_property
    def sections(self) -> Sections:
        """The critical path of the whole trace (module docstring), every root's."""
        tree = self.analysis.tree
        low, high = reduce_subtrees(tree.parent, tree.depth, [(tree.start_ns, np.minimum), (tree.end_ns, np.maximum)])
        if (low == tree.start_ns).all() and (high == tree.end_ns).all():
            return self.analysis.sections
        return critical_path_sections(replace(tree, start_ns=low, end_ns=high))

    @property
    def on_critical_path(self) -> BoolArray:
        """Spans on the critical path of the whole trace (:attr:`sections`)."""
        return self.sections.on_path

    @cached_property
    def adjustment(self) -> npt.NDArray[np.int8]:
        """Per span, the adjuster that moved it for the analysis (index into :data:`analysis.tree.ADJUSTMENTS`,
        0: none)."""
        adjusted = self.analysis.tree.adjustment
        return np.zeros(self.size, dtype=np.int8) if adjusted is None else adjusted

    @property
    def root_reason(self) -> npt.NDArray[np.int8]:
        """Per span, why it is a root (index into :data:`analysis.tree.ROOT_REASONS`; 0 for a child)."""
        return self.analysis.reported_tree.root_reason

    @cached_property
    def critical_sections(self) -> tuple[IntArray, IntArray, IntArray]:
        """Critical-path sections as ``(offsets, start_ns, end_ns)``: span ``i``'s sections, in time order, are
        ``[offsets[i], offsets[i + 1])``."""
        sections = self.sections
        order = np.lexsort((sections.start_ns, sections.span))
        offsets = np.searchsorted(sections.span[order], np.arange(self.size + 1))
        return offsets, sections.start_ns[order], sections.end_ns[order]

    @cached_property
    def critical_own_ns(self) -> IntArray:
        """Per span, ns of the whole trace's critical path inside its own interval (:meth:`critical_ns`'s first
        value, for every span at once)."""
        return own_critical_ns(self.sections, self.span_start_ns, self.span_end_ns)

    @cached_property
    def agent_graph(self) -> pl.DataFrame:
        """Who called which model, tool, retriever or agent (:func:`analysis.agent_graph.agent_graph`), each edge
        with its time on this trace's critical path."""
        return agent_graph(self.analysis, self.critical_own_ns, self.model_calls)

    @cached_property
    def analysis_children(self) -> tuple[IntArray, IntArray]:
        """The analysis tree's CHILD_OF children as ``(offsets, child)``: span ``i``'s children, by start, are
        ``child[offsets[i]:offsets[i + 1]]`` (FOLLOWS_FROM children do not block their parent, so they leave
        its time untraced)."""
        tree = self.analysis.tree
        child = np.flatnonzero((tree.parent >= 0) & ~tree.follows_from)
        child = child[np.argsort(tree.parent[child], kind="stable")]
        return np.searchsorted(tree.parent[child], np.arange(self.size + 1)), child

    def gaps(self, spans: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """The untraced stretches of ``spans`` (span indices): the parts of each span's own interval
        (``TraceAnalysis.own_intervals``: a root that ended owns none of its envelope window's untraced time) none of
        its analysis children covers, for spans that have children. Returns aligned ``(which, start_ns, end_ns)``
        with ``which`` the position in ``spans``; per span they sum to its :attr:`self_ns`."""
        offsets, child = self.analysis_children
        own_start, own_end = self.analysis.own_intervals
        out_which, out_start, out_end = [], [], []
        for which in np.flatnonzero(offsets[spans + 1] > offsets[spans]):
            span = spans[which]
            kids = child[offsets[span] : offsets[span + 1]]
            low, high = own_start[span], own_end[span]
            starts = np.clip(self.span_start_ns[kids], low, high)
            order = np.argsort(starts, kind="stable")
            covered = np.maximum.accumulate(np.clip(self.span_end_ns[kids], low, high)[order])
            # Gap k runs from everything covered so far to the next child's start (the last to the span's end).
            gap_start = np.maximum.accumulate(np.r_[low, covered])
            gap_end = np.r_[starts[order], high]
            keep = gap_end > gap_start
            out_start.append(gap_start[keep])
            out_end.append(gap_end[keep])
            out_which.append(np.full(int(keep.sum()), which, dtype=np.int64))
        if not out_which:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty, empty
        return np.concatenate(out_which), np.concatenate(out_start), np.concatenate(out_end)

    def search(self, text: str) -> IntArray:
        """Spans matching ``text``, in display order: case-insensitive, ``key=value`` an attribute's exact
        value, anything else a part of the span's name, service, attribute keys or values, or the start of its
        span ID. The last search is kept, so a reader scrolling its results does not search again."""
        text = text.strip().lower()
        if not text:
            return np.empty(0, dtype=np.int64)
        known = self._last_search
        if known is not None and known[0] == text:
            return known[1]
        key, equals, value = text.partition("=")
        if equals and key.strip():
            mask = self.spans.select(
                pl.col("attributes")
                .map.entries()
                .list.eval(
                    (pl.element().struct.field("key").str.to_lowercase() == key.strip())
                    & (pl.element().struct.field("value").str.to_lowercase() == value.strip())
                )
                .list.any()
            ).to_series()
        else:
            lowered = [pl.col(name).fill_null("").str.to_lowercase() for name in ("name", "service_name")]
            entries = (
                pl.col("attributes")
                .map.entries()
                .list.eval(
                    pl.concat_str(pl.element().struct.field("key"), pl.lit("="), pl.element().struct.field("value"))
                    .str.to_lowercase()
                    .str.contains(text, literal=True)
                )
            )
            mask = self.spans.select(
                lowered[0].str.contains(text, literal=True)
                | lowered[1].str.contains(text, literal=True)
                | pl.col("span_id").str.starts_with(text)
                | entries.list.any().fill_null(False)
            ).to_series()
        found = np.flatnonzero(mask.fill_null(False).to_numpy())
        found = found[np.argsort(self.row[found], kind="stable")]
        self._last_search = (text, found)
        return found

    @cached_property
    def groups(self) -> Groups:
        """Repeated siblings (:class:`Groups`)."""
        keyed = pl.DataFrame(
            {"parent": self.parent, "service": self.service, "name": self.spans["name"].fill_null("")}
        ).with_row_index("index")
        members = keyed.group_by("parent", "service", "name").agg("index").with_row_index("group")
        exploded = members.select("group", "index").explode("index")
        group = np.empty(self.size, dtype=np.int64)
        group[exploded["index"].to_numpy().astype(np.int64)] = exploded["group"].to_numpy()
        count = members.height
        size = np.bincount(group, minlength=count).astype(np.int64)
        leader_row = np.full(count, self.size, dtype=np.int64)
        np.minimum.at(leader_row, group, self.row)
        start = np.full(count, np.iinfo(np.int64).max, dtype=np.int64)
        end = np.full(count, np.iinfo(np.int64).min, dtype=np.int64)
        np.minimum.at(start, group, self.span_start_ns)
        np.maximum.at(end, group, self.span_end_ns)
        total = whole_sums(group, self.duration, count)
        errors = np.bincount(group, weights=self.error, minlength=count).astype(np.int64)
        members = np.argsort(group, kind="stable")
        offsets = np.searchsorted(group[members], np.arange(count + 1))
        return Groups(group, size, self.order[leader_row], start, end, total, errors, offsets, members)

    @property
    def root_duration_ns(self) -> int:
        """The request window's duration, ns (the root span's in the analysis tree: its own, run on to the end of work
        started in it that outlived it, or the envelope of the spans where the root is missing or never ended,
        :mod:`analysis.request_window`)."""
        return int(self.span_end_ns[self.primary_root] - self.span_start_ns[self.primary_root])

    @cached_property
    def request_stages_ns(self) -> IntArray:
        """Per stage of :data:`analysis.STAGES`, ns of the request's latency as the Stages page and the trace
        pipeline attribute it (:func:`analysis.stage_breakdown`): the primary root's critical path over the request's
        window, summing to :attr:`root_duration_ns`. Differs from :attr:`lane` where work started after that window
        ended or the trace has several roots."""
        breakdown = stage_breakdown(self.analysis)
        totals = np.zeros(len(STAGES), dtype=np.int64)
        totals[breakdown["stage"].to_physical().to_numpy()] = breakdown["duration_ns"].to_numpy()
        return totals

    @cached_property
    def lane(self) -> StageLane:
        """The stage lane (:class:`StageLane`)."""
        sections = self.sections
        span, start, end = sections.span, sections.start_ns, sections.end_ns
        own_start = np.maximum(start, self.span_start_ns[span])
        own_end = np.minimum(end, self.span_end_ns[span])
        inside = own_end > own_start
        _, stage, piece_start, piece_end = self.analysis.pieces.cut(span[inside], own_start[inside], own_end[inside])
        # Before and after the span's own interval: the stretches the widened path walks through untraced.
        before_end = np.minimum(end, self.span_start_ns[span])
        after_start = np.maximum(start, self.span_end_ns[span])
        stage = np.concatenate([stage, np.full(2 * span.size, UNTRACED)])
        start = np.concatenate([piece_start, start, after_start])
        end = np.concatenate([piece_end, before_end, end])
        lasting = end > start
        stage, start, end = stage[lasting], start[lasting], end[lasting]
        traced = stage >= 0
        totals = whole_sums(stage[traced], (end - start)[traced], len(STAGES))
        order = np.argsort(start, kind="stable")
        stage, start, end = stage[order], start[order], end[order]
        overlapping = start.size > 1 and bool((start[1:] < np.maximum.accumulate(end)[:-1]).any())
        if not overlapping:
            stage, start, end = _merge_adjacent(stage, start, end)
        untraced = int((end - start)[stage == UNTRACED].sum())
        waiting = self.duration_ns - _covered(start, end) + untraced
        return StageLane(start, end, stage, totals, untraced, waiting, overlapping)

    @cached_property
    def minimap(self) -> Minimap:
        """The minimap (:class:`Minimap`)."""
        rows = self.order
        bands = min(MINIMAP_BUCKETS, rows.size)
        band = (np.arange(rows.size) * bands) // rows.size
        start = np.full(bands, np.iinfo(np.int64).max, dtype=np.int64)
        end = np.full(bands, np.iinfo(np.int64).min, dtype=np.int64)
        np.minimum.at(start, band, self.span_start_ns[rows])
        np.maximum.at(end, band, self.span_end_ns[rows])
        # Longest span per band: sort by (band, duration) and take each band's last.
        by_length = np.lexsort((self.duration[rows], band))
        last = np.r_[band[by_length][1:] != band[by_length][:-1], True]
        service = self.service[rows[by_length[last]]]
        return Minimap(start, end, service, np.bincount(band, minlength=bands).astype(np.int64))

    @cached_property
    def model_calls(self) -> pl.DataFrame:
        """The trace's model calls (:func:`analysis.model_calls.model_calls`: model, provider, tokens counted
        once, TTFT and stream time per call; ``index`` is the span index)."""
        return model_calls(self.analysis)

    @cached_property
    def summary(self) -> dict[str, object]:
        """The request's facts (:func:`analysis.request_summary`'s row for this trace: root, counts, tenant,
        model, llm_calls, ttft_ns, tpot_ns, token totals)."""
        return request_summary(self.analysis).row(0, named=True)

    @cached_property
    def data_quality(self) -> list[str]:
        """The request's data-quality line, one sentence per concern (:func:`analysis.data_quality`): the window is
        the envelope of the spans, the root is implausible, spans were re-attached; empty when none."""
        return data_quality(self.analysis)["notes"][0].to_list()

    @cached_property
    def duplicates(self) -> int:
        """Extra copies of repeated span IDs dropped from the tree (the last copy of an ID is kept)."""
        copies = self.analysis.reported_tree.duplicates["copies"]
        return int(copies.sum() - copies.len()) if copies.len() else 0

    def span_index(self, span_id: str) -> int | None:
        """The index of the span with ``span_id`` (lowercase hex), None when the trace has none."""
        hits = self.spans["span_id"].eq(span_id).arg_true()
        return int(hits[0]) if hits.len() else None

    def adjustment_name(self, span: int) -> str:
        """What the adjusters did to ``span`` (:data:`analysis.tree.ADJUSTMENTS`; ``""``: nothing)."""
        return ADJUSTMENTS[int(self.adjustment[span])]

    def root_reason_name(self, span: int) -> str:
        """Why ``span`` is a root (:data:`analysis.tree.ROOT_REASONS`; ``""`` for a child)."""
        return ROOT_REASONS[int(self.root_reason[span])]

    def pieces_of(self, span: int) -> list[tuple[str, int, int]]:
        """``span``'s stage pieces ``(stage, start_ns, end_ns)`` in time order: one for an ordinary span,
        vLLM's phases or an untraced call's first token and stream for a tiled one."""
        pieces = self.analysis.pieces
        low, high = int(pieces.offsets[span]), int(pieces.offsets[span + 1])
        return [
            (STAGES[int(pieces.stage[i])], int(pieces.start_ns[i]), int(pieces.end_ns[i])) for i in range(low, high)
        ]

    def critical_ns(self, span: int) -> tuple[int, int]:
        """ns of ``span`` on the critical path of the whole trace: ``(inside its own interval, outside it)``; the
        second is time the widened path (module docstring) waits under it on nothing traced."""
        offsets, start, end = self.critical_sections
        low, high = int(offsets[span]), int(offsets[span + 1])
        total = int((end[low:high] - start[low:high]).sum())
        inside = int(self.critical_own_ns[span])
        return inside, total - inside


def build_trace_view(
    trace_id: str,
    spans: pl.DataFrame,
    rules: StageRules | None = None,
    *,
    stored_spans: int | None = None,
    operations: pl.DataFrame | None = None,
) -> TraceView:
    """The view of one trace's spans (as ``storage.reader.TraceReader.trace`` returns them) with the stage
    ``rules`` (default: the packaged table, read from its file on each call: pass it when building many);
    ``stored_spans`` and ``operations``: what the store holds, and its sum by operation, when ``spans`` are only
    the trace's first ones (:class:`TraceView`).

    Raises:
        ValueError: ``spans`` is empty, holds several traces, or breaks the span-frame contract
            (:mod:`analysis.spans`).
    """
    return TraceView(trace_id, analyze(spans, rules), stored_spans, operations)


def _display_order(parent: IntArray, depth: IntArray, primary_root: int) -> tuple[IntArray, IntArray, IntArray]:
    """Depth-first rows of a forest (``depth``: each span's ancestors): ``(order, row, end_row)``: the span on
    each row, each span's row, and the row after its subtree. Roots come primary first, then by index; siblings
    by index (spans are sorted by start). Subtree sizes are summed level by level from the deepest; each span's
    row is then a sum along its path of its siblings' sizes before it, by pointer jumping, so nothing
    recurses."""
    n = parent.size
    (size,) = reduce_subtrees(parent, depth, [(np.ones(n, dtype=np.int64), np.add)])
    # Each span's offset within its parent's subtree: 1 (the parent's own row) plus its earlier siblings' sizes.
    child = np.flatnonzero(parent >= 0)
    child = child[np.argsort(parent[child], kind="stable")]
    before = np.cumsum(size[child]) - size[child]
    first = np.r_[True, parent[child][1:] != parent[child][:-1]] if child.size else np.empty(0, dtype=bool)
    group_base = np.maximum.accumulate(np.where(first, before, 0)) if child.size else before
    local = np.zeros(n, dtype=np.int64)
    local[child] = 1 + before - group_base
    roots = np.flatnonzero(parent < 0)
    roots = np.r_[primary_root, roots[roots != primary_root]]
    local[roots] = np.cumsum(size[roots]) - size[roots]
    row = reduce_to_root(parent, local, np.add)
    order = np.empty(n, dtype=np.int64)
    order[row] = np.arange(n)
    return order, row, row + size


def _covered(start: IntArray, end: IntArray) -> int:
    """ns the union of the intervals covers (``start`` ascending)."""
    if not start.size:
        return 0
    # Each interval adds what it reaches beyond every earlier one.
    reached = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(end)[:-1]]
    return int(np.clip(end - np.maximum(start, reached), 0, None).sum())


def _merge_adjacent(stage: IntArray, start: IntArray, end: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """Time-ordered, non-overlapping parts with each run of touching parts of one stage merged into one."""
    if stage.size < 2:
        return stage, start, end
    joins = (stage[1:] == stage[:-1]) & (start[1:] == end[:-1])
    first = np.r_[True, ~joins]
    last = np.r_[~joins, True]
    return stage[first], start[first], end[last]
