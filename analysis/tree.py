"""Span trees of many traces at once: parent resolution, repairs, depth, roots and Jaeger UI's clamping.

:func:`build_tree` turns a span frame (see :mod:`analysis.spans`) into a :class:`SpanTree` that every other
analysis reuses. Rules, applied per trace:

- **Duplicate span IDs**: the copy that ends last wins, the last row of the frame among copies ending together (a
  re-sent span supersedes the earlier copy; a span sent when started, end == start, and again when ended keeps
  its ended copy whatever order they arrive in); the IDs and their copy counts are reported in
  :attr:`SpanTree.duplicates`.
- **Orphans**: a span whose ``parent_span_id`` is not in its trace becomes a root (reason ``orphan``).
- **Self-parent**: a span naming itself as parent becomes a root (reason ``self_parent``).
- **Cycles** (``a -> b -> a``, any length): in each cycle the member that started first becomes a root
  (reason ``cycle``); ties go to the longer span, then the smaller span ID. The earliest member is the
  likeliest true ancestor, since a parent starts no later than its children.
- **FOLLOWS_FROM**: a span whose parent relation is a FOLLOWS_FROM reference (Jaeger's model, carried in
  OTLP as a link to the parent with ``opentracing.ref_type=follows_from``, as the OTel Collector's Jaeger
  translator writes it) stays in the tree but is flagged ``follows_from``: it does not block its parent,
  so self time and the critical path ignore it (and its subtree, for the critical path).
- **Link-only children**: in OTLP a link is not a parent. A span with no parent (or a lost one) that links
  to a span of its own trace is a root of its own subtree, flagged ``link_only``.
- **The trace's root** (:attr:`SpanTree.primary_root`), when a trace has several roots: the first of them
  by (a genuine root with an empty parent ID, longest duration, earliest start, smallest span ID). A span
  link does not demote a span: a 0.1 ms orphan is no request's root because its longer siblings link to
  spans. Here other roots are the roots of their own subtrees; the analysis tree attaches them to the trace's
  root, whose window becomes the trace's envelope (:mod:`analysis.request_window`).

Critical-path clamping (:meth:`SpanTree.clamped`), after trimming the overlaps a millisecond start clock fakes
(:func:`trim_clock_overlaps`), follows Jaeger UI's
``packages/jaeger-ui/src/components/TracePage/CriticalPath/utils/sanitizeOverFlowingChildren``: each child is
cut to its (already cut) parent's interval; a child lying wholly outside it (starting at or after the parent's
end, or ending at or before the parent's start when it starts earlier) is dropped with its whole subtree.
Cutting against every ancestor in turn is the same as intersecting the span with all of them, which
:mod:`analysis.ancestry` does by pointer jumping.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from analysis import ancestry
from analysis.ancestry import BoolArray, IntArray
from analysis.spans import prepare_spans

RootReason = Literal["", "root", "orphan", "self_parent", "cycle"]
ROOT_REASONS: tuple[RootReason, ...] = ("", "root", "orphan", "self_parent", "cycle")
"""Codes of :attr:`SpanTree.root_reason`, by position: ``""`` is a span with a resolved parent."""
_CHILD, _ROOT, _ORPHAN, _SELF_PARENT, _CYCLE = range(5)

Adjustment = Literal[
    "", "wrapped", "lifted", "shifted", "streamed", "early_action", "spawned", "attached", "enveloped", "extended"
]
ADJUSTMENTS: tuple[Adjustment, ...] = (
    "",
    "wrapped",
    "lifted",
    "shifted",
    "streamed",
    "early_action",
    "spawned",
    "attached",
    "enveloped",
    "extended",
)
"""Codes of :attr:`SpanTree.adjustment`, by position: ``wrapped``, analysed under a childless sibling that
contains it (:mod:`analysis.wrappers`); ``lifted``, a server span that outlives its client span analysed under
the caller's enclosing span, ``shifted``, a server span moved into its client span against clock skew
(:mod:`analysis.remote_spans`); ``streamed``, an LLM call extended to the end of its stream, as a stream log
reports it, or the log moved under its call (:mod:`analysis.stream_logs`); ``early_action``, an LLM call
ended where its caller started a step on its answer that outlives it, or such a step inside a childless call
analysed as the call's child (:mod:`analysis.early_actions`); ``spawned``, work of the request that outlives the
span that started it or starts after it returned, kept whole, ``extended``, a span analysed as ending later (or a
wrapper as starting earlier) to hold such work, or what it adopted, below it (:mod:`analysis.spawned_tasks`,
:mod:`analysis.wrappers`); ``attached``, a parentless span (its parent missing, or a second root) analysed under
the trace's root, ``enveloped``, a trace's root whose window is the envelope of the trace's spans, because the
root is missing or never ended (:mod:`analysis.request_window`)."""
WRAPPED, LIFTED, SHIFTED, STREAMED, EARLY_ACTION, SPAWNED, ATTACHED, ENVELOPED, EXTENDED = 1, 2, 3, 4, 5, 6, 7, 8, 9

FOLLOWS_FROM_KEY = "opentracing.ref_type"
FOLLOWS_FROM_VALUE = "follows_from"


@dataclass(frozen=True)
class Clamped:
    """Span intervals as Jaeger UI's critical path sees them, aligned with :attr:`SpanTree.spans`.

    Attributes:
        start_ns, end_ns: the span cut to its ancestors' intervals (Int64 ns since the epoch); meaningless
            where ``excluded``.
        dropped: the span or an ancestor lies wholly outside its parent.
        excluded: ``dropped``, or the span or an ancestor is a FOLLOWS_FROM child; excluded spans are not on
            any critical path.
    """

    start_ns: IntArray
    end_ns: IntArray
    dropped: BoolArray
    excluded: BoolArray


@dataclass(frozen=True)
class SpanTree:
    """Resolved span forest of one or many traces. Arrays are aligned with the rows of :attr:`spans`.

    Attributes:
        spans: the prepared input, one row per span ID (duplicates removed), sorted by trace_id, then
            start, then span_id; row ``i`` is span index ``i``.
        trace: dense trace number of each span (Int64, 0-based, in trace_id order).
        parent: index of the resolved parent, ``-1`` for roots.
        start_ns, end_ns: raw span interval, Int64 ns since the Unix epoch.
        depth: number of ancestors (0 for roots).
        root: index of the root of the span's tree.
        root_reason: index into :data:`ROOT_REASONS` (0 for a span with a parent).
        follows_from: the span's relation to its parent is FOLLOWS_FROM.
        link_only: a root that links to a span of its own trace.
        primary_root: per trace number, the index of the trace's root span.
        duplicates: trace_id (String), span_id (String), copies (UInt32) for IDs seen more than once.
        reported_parent: the resolved parent as the spans report it, where an adjuster changed ``parent`` for
            the analysis (:mod:`analysis.wrappers`); None when ``parent`` is it.
        adjustment: per span, the adjuster that changed it for the analysis, an index into
            :data:`ADJUSTMENTS` (0: none); None when no span was changed.
    """

    spans: pl.DataFrame
    trace: IntArray
    parent: IntArray
    start_ns: IntArray
    end_ns: IntArray
    depth: IntArray
    root: IntArray
    root_reason: npt.NDArray[np.int8]
    follows_from: BoolArray
    link_only: BoolArray
    primary_root: IntArray
    duplicates: pl.DataFrame
    reported_parent: IntArray | None = None
    adjustment: npt.NDArray[np.int8] | None = None

    @property
    def size(self) -> int:
        """Number of spans."""
        return self.spans.height

    @property
    def trace_count(self) -> int:
        """Number of traces."""
        return self.primary_root.size

    @cached_property
    def in_primary_tree(self) -> BoolArray:
        """True for spans under their trace's root (:attr:`primary_root`)."""
        return self.root == self.primary_root[self.trace]

    @cached_property
    def clamped(self) -> Clamped:
        """The intervals Jaeger UI's critical path works on (see the module docstring), after trimming
        millisecond-clock overlaps (:func:`trim_clock_overlaps`)."""
        trimmed = trim_clock_overlaps(np.where(self.follows_from, -1, self.parent), self.start_ns, self.end_ns)
        low, high = ancestry.reduce_many(self.parent, [(self.start_ns, np.maximum), (trimmed, np.minimum)])
        child = np.flatnonzero(self.parent >= 0)
        above = self.parent[child]
        # The trimmed end decides too: a child cut back to end before its parent starts lies wholly outside it.
        start, end = self.start_ns[child], trimmed[child]
        outside = np.zeros(self.size, dtype=bool)
        outside[child] = (start >= high[above]) | ((start < low[above]) & (end <= low[above]))
        dropped, excluded = ancestry.reduce_many(
            self.parent, [(outside, np.logical_or), (outside | self.follows_from, np.logical_or)]
        )
        return Clamped(low, high, dropped, excluded)

    def frame(self) -> pl.DataFrame:
        """The resolved tree as a frame, one row per span in :attr:`spans` order.

        Columns: trace_id, span_id (String); parent_span_id (String, the resolved parent as the span reports
        it, ``""`` for roots); analysis_parent_span_id (String, the parent the analysis uses: the same unless
        an adjuster moved the span, see ``adjustment``); depth (Int64, in the analysis tree); root_span_id
        (String); root_reason (String, see :data:`ROOT_REASONS`); is_primary_root, in_primary_tree,
        follows_from, link_only (Boolean); adjustment (String, see :data:`ADJUSTMENTS`).
        """
        ids = self.spans["span_id"]

        def parent_ids(parent: IntArray) -> pl.Series:
            has_parent = parent >= 0
            return ids.gather(np.where(has_parent, parent, 0)).zip_with(
                pl.Series(has_parent), pl.repeat("", self.size, eager=True)
            )

        is_primary = np.zeros(self.size, dtype=bool)
        is_primary[self.primary_root] = True
        return pl.DataFrame(
            {
                "trace_id": self.spans["trace_id"],
                "span_id": ids,
                "parent_span_id": parent_ids(self.parent if self.reported_parent is None else self.reported_parent),
                "analysis_parent_span_id": parent_ids(self.parent),
                "depth": self.depth,
                "root_span_id": ids.gather(self.root),
                "root_reason": pl.Series(ROOT_REASONS, dtype=pl.String).gather(self.root_reason),
                "is_primary_root": is_primary,
                "in_primary_tree": self.in_primary_tree,
                "follows_from": self.follows_from,
                "link_only": self.link_only,
                "adjustment": pl.Series(ADJUSTMENTS, dtype=pl.String).gather(
                    np.zeros(self.size, dtype=np.int8) if self.adjustment is None else self.adjustment
                ),
            }
        )


CLOCK_GRANULARITY_NS = 1_000_000
"""Granularity of the coarsest span clock Hotspan corrects for: the OpenTelemetry JS SDK (2.x) stamps a span's
start with ``Date.now()`` (whole milliseconds) and its end as start plus a ``performance.now()`` duration."""


def trim_clock_overlaps(parent: IntArray, start: IntArray, end: IntArray) -> IntArray:
    """``end`` with each span that overlaps its next sibling (by start) by less than the clock granularity, where
    that sibling starts on a whole millisecond and lasts, cut back to the sibling's start. ``parent`` is -1 for
    spans that are no one's sibling here (roots; FOLLOWS_FROM children, which never block).

    Sequential steps timed by a millisecond start clock seem to overlap by up to a millisecond (observed with
    the Vercel AI SDK on the OpenTelemetry JS SDK, ``tests/realworld``); cut, the earlier step ends as the next
    begins, as it did. Any other overlap is real concurrency and is kept.
    """
    child = np.flatnonzero(parent >= 0)
    order = child[np.lexsort((child, start[child], parent[child]))]
    earlier, later = order[:-1], order[1:]
    siblings = parent[earlier] == parent[later]
    overlap = end[earlier] - start[later]
    trim = (
        siblings
        & (start[earlier] < start[later])
        & (overlap > 0)
        & (overlap < CLOCK_GRANULARITY_NS)
        & (start[later] % CLOCK_GRANULARITY_NS == 0)
        & (end[later] > start[later])
    )
    trimmed = end.copy()
    trimmed[earlier[trim]] = start[later[trim]]
    return trimmed


def build_tree(frame: pl.DataFrame) -> SpanTree:
    """Resolve parents, repair the forest and compute depths and roots for every trace in ``frame``.

    Args:
        frame: spans of any number of traces (contract in :mod:`analysis.spans`).

    Raises:
        ValueError: the frame breaks the input contract.
    """
    prepared = prepare_spans(frame)
    unique, duplicates = _drop_duplicates(prepared)
    spans = unique.sort("trace_id", "start_time_unix_nano", "span_id")
    trace = spans["trace_id"].rle_id().cast(pl.Int64).to_numpy()
    start = spans["start_time_unix_nano"].to_numpy().astype(np.int64)
    end = spans["end_time_unix_nano"].to_numpy().astype(np.int64)
    parent, reason = _resolve_parents(spans, trace)
    _break_cycles(parent, reason, start, end)
    links = _links(spans)
    follows_from = _follows_from_children(links, parent)
    link_only = _link_only_roots(spans, links, parent)
    depth, root = ancestry.depths_and_roots(parent)
    primary = _primary_roots(trace, parent, reason, start, end)
    return SpanTree(
        spans=spans,
        trace=trace,
        parent=parent,
        start_ns=start,
        end_ns=end,
        depth=depth,
        root=root,
        root_reason=reason,
        follows_from=follows_from,
        link_only=link_only,
        primary_root=primary,
        duplicates=duplicates,
    )


def adjusted_tree(
    tree: SpanTree,
    parent: IntArray,
    changed: BoolArray,
    code: int | npt.NDArray[np.int8],
    shift_ns: IntArray | None = None,
    end_ns: IntArray | None = None,
    start_ns: IntArray | None = None,
) -> SpanTree:
    """``tree`` with the analysis parents ``parent`` (spans' times moved by ``shift_ns``, ns, and their ends and
    starts set to ``end_ns`` and ``start_ns``, ns since the epoch, where given), ``changed`` spans marked with
    adjustment ``code`` (:data:`ADJUSTMENTS`: one for all, or an array of one per span); depths and roots
    recomputed, the reported parents kept. An adjuster's one way to build its result."""
    depth, root = ancestry.depths_and_roots(parent)
    adjustment = np.zeros(tree.size, dtype=np.int8) if tree.adjustment is None else tree.adjustment.copy()
    adjustment[changed] = code if isinstance(code, int) else code[changed]
    spans, start, end = tree.spans, tree.start_ns, tree.end_ns
    if shift_ns is not None:
        start, end = start + shift_ns, end + shift_ns
    if end_ns is not None:
        end = end_ns
    if start_ns is not None:
        start = start_ns
    if shift_ns is not None or end_ns is not None or start_ns is not None:
        spans = spans.with_columns(pl.Series("start_time_unix_nano", start), pl.Series("end_time_unix_nano", end))
    return replace(
        tree,
        spans=spans,
        parent=parent,
        start_ns=start,
        end_ns=end,
        depth=depth,
        root=root,
        reported_parent=tree.parent if tree.reported_parent is None else tree.reported_parent,
        adjustment=adjustment,
    )


def as_tree(spans: pl.DataFrame | SpanTree) -> SpanTree:
    """``spans`` itself when it is already a :class:`SpanTree`, else :func:`build_tree` of it."""
    return spans if isinstance(spans, SpanTree) else build_tree(spans)


def span_tree(spans: pl.DataFrame | SpanTree) -> pl.DataFrame:
    """The resolved tree as a frame: see :meth:`SpanTree.frame`."""
    return as_tree(spans).frame()


def _drop_duplicates(spans: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``spans`` keeping, of each (trace_id, span_id), the copy that ends last (the last row among copies ending
    together), and the report of repeated IDs.

    Repeats are found by a 64-bit row hash and confirmed on the (few) rows whose hash repeats, so a hash
    collision never drops a span.
    """
    ids = spans.select("trace_id", "span_id")
    suspects = ids.hash_rows().is_duplicated()
    report_schema = {"trace_id": pl.String, "span_id": pl.String, "copies": pl.UInt32}
    if not suspects.any():
        return spans, pl.DataFrame(schema=report_schema)
    candidates = ids.with_row_index("row").with_columns(spans["end_time_unix_nano"].alias("end")).filter(suspects)
    copies = candidates.group_by("trace_id", "span_id").agg(
        pl.len().cast(pl.UInt32).alias("copies"), pl.col("row").sort_by("end", "row")
    )
    repeated = copies.filter(pl.col("copies") > 1)
    superseded = repeated.select(pl.col("row").list.head(pl.col("row").list.len() - 1)).explode("row")["row"]
    keep = np.ones(spans.height, dtype=bool)
    keep[superseded.to_numpy()] = False
    return spans.filter(keep), repeated.drop("row").sort("trace_id", "span_id").cast(report_schema)


def _resolve_parents(spans: pl.DataFrame, trace: IntArray) -> tuple[IntArray, npt.NDArray[np.int8]]:
    # Join on a 64-bit hash of (trace, span ID), then keep only exact matches: fast, and collision-proof.
    index = np.arange(spans.height)
    keyed = pl.DataFrame({"trace": trace, "id": spans["span_id"]})
    wanted = pl.DataFrame({"trace": trace, "id": spans["parent_span_id"]})
    candidates = pl.DataFrame({"key": wanted.hash_rows(), "row": index}).join(
        pl.DataFrame({"key": keyed.hash_rows(), "index": index}), on="key"
    )
    row, match = candidates["row"].to_numpy(), candidates["index"].to_numpy()
    named = (spans["parent_span_id"] != "").to_numpy()
    exact = (
        named[row]
        & (trace[row] == trace[match])
        & (spans["parent_span_id"].gather(row) == spans["span_id"].gather(match)).to_numpy()
    )
    parent = np.full(spans.height, -1, dtype=np.int64)
    parent[row[exact]] = match[exact]
    reason = np.full(spans.height, _CHILD, dtype=np.int8)
    reason[~named] = _ROOT
    reason[named & (parent < 0)] = _ORPHAN
    self_parent = parent == index
    reason[self_parent] = _SELF_PARENT
    parent[self_parent] = -1
    return parent, reason


def _break_cycles(parent: IntArray, reason: npt.NDArray[np.int8], start: IntArray, end: IntArray) -> None:
    """Cut every parent cycle in place (rule in the module docstring)."""
    candidates = np.flatnonzero(ancestry.unrooted(parent))
    if not candidates.size:
        return
    members = ancestry.cycle_members(parent, candidates)
    # Rank = position in (start, longer first, index) order: spans are already sorted by span_id within a start.
    order = np.lexsort((np.arange(parent.size), -(end - start), start))
    rank = np.empty(parent.size, dtype=np.int64)
    rank[order] = np.arange(parent.size)
    cut = members[rank[members] == ancestry.min_on_cycle(parent, members, rank)]
    parent[cut] = -1
    reason[cut] = _CYCLE


def _links(spans: pl.DataFrame) -> pl.DataFrame:
    """One row per link to a span of the same trace: index (Int64, the linking span), trace_id,
    parent_span_id, link_span_id (String), ref_type (String, null when the link has no
    ``opentracing.ref_type``)."""
    linked = spans.with_row_index("index").filter(pl.col("link_span_ids").list.len() > 0)
    if not linked.height:
        return pl.DataFrame(
            schema={n: pl.String for n in ("trace_id", "parent_span_id", "link_span_id", "ref_type")}
            | {"index": pl.Int64}
        )
    # The other link columns are read by position, so a frame whose link lists disagree in length still works.
    exploded = linked.with_columns(position=pl.int_ranges(0, pl.col("link_span_ids").list.len())).explode(
        "link_span_ids", "position"
    )
    link_trace = pl.col("link_trace_ids").list.get(pl.col("position"), null_on_oob=True).fill_null("")
    link_attributes = pl.col("link_attributes").list.get(pl.col("position"), null_on_oob=True)
    return exploded.filter((link_trace == "") | (link_trace == pl.col("trace_id"))).select(
        pl.col("index").cast(pl.Int64),
        "trace_id",
        "parent_span_id",
        pl.col("link_span_ids").alias("link_span_id"),
        link_attributes.map.get(FOLLOWS_FROM_KEY).alias("ref_type"),
    )


def _follows_from_children(links: pl.DataFrame, parent: IntArray) -> BoolArray:
    flags = np.zeros(parent.size, dtype=bool)
    hits = links.filter(
        (pl.col("link_span_id") == pl.col("parent_span_id"))
        & (pl.col("ref_type").str.to_lowercase() == FOLLOWS_FROM_VALUE)
    )
    flags[hits["index"].to_numpy()] = True
    return flags & (parent >= 0)


def _link_only_roots(spans: pl.DataFrame, links: pl.DataFrame, parent: IntArray) -> BoolArray:
    flags = np.zeros(parent.size, dtype=bool)
    if not links.height:
        return flags
    known = spans.select("trace_id", pl.col("span_id").alias("link_span_id"))
    hits = links.join(known, on=["trace_id", "link_span_id"], how="semi")
    flags[hits["index"].to_numpy()] = True
    return flags & (parent < 0)


def _primary_roots(
    trace: IntArray, parent: IntArray, reason: npt.NDArray[np.int8], start: IntArray, end: IntArray
) -> IntArray:
    candidates = np.flatnonzero(parent < 0)
    # Rows are sorted by (trace_id, start, span_id), so the index breaks the remaining ties by span ID.
    order = np.lexsort(
        (candidates, start[candidates], -(end - start)[candidates], reason[candidates] != _ROOT, trace[candidates])
    )
    ranked = candidates[order]
    first = np.ones(ranked.size, dtype=bool)
    first[1:] = trace[ranked[1:]] != trace[ranked[:-1]]
    return ranked[first]
