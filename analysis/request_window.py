"""The request's window: the one definition of a trace's request, which every view reads.

A request is a trace; its root is :attr:`analysis.tree.SpanTree.primary_root` and its window the root's interval,
unless the root is missing or never ended (issue 27, as real exporters, frameworks and samplers send them):

1. **Attach.** Every other parentless span of the trace (an orphan whose parent never arrived, a span naming
   itself or in a parent cycle, a second root, a span that only links to others) is analysed as the child of the
   innermost span of the trace whose interval holds its own, the root where none does (adjustment ``attached``): a
   span of the trace is part of its request, never listed beside it and left out of its breakdown, and a model call
   whose filtered parent ran inside a tool (an MCP server sampling the client's model, a tool running a sub-agent)
   is where that tool waited for it, not a sibling the critical path walks past. A parentless span may attach
   under the root's tree or under the tree of a longer parentless span (then earlier, then first in span order),
   so attachments never make a cycle; never under the tree of an orphan that names the same lost parent: those
   are siblings (concurrent queries of a lost server span), side by side as Jaeger UI and Zipkin show them.
2. **Envelope.** The root's window becomes the envelope of the trace's spans, earliest start to latest end
   (adjustment ``enveloped``), when the root is **missing**: the trace arrived with several parentless spans, or
   its one parentless span names a parent that is not there; or **never ended**: it lasts 0 ns while other spans
   of the trace last, or the spans of its own tree work after its end for longer than it lasted itself and
   than :data:`~analysis.spawned_tasks.MIN_OVERHANG_NS` (the union of their intervals past its end: the request's
   work mostly came after the root "ended", an end its instrumentation wrote early). An idle gap before late work,
   and work of a second root or of an orphan, are not work of the root's tree: they do not make a root that ended
   unended. Jaeger and Tempo show such a trace's duration as the envelope too.

The root itself then reads as the trace's envelope, but its own time stays inside its own interval
(:func:`own_intervals`, which :func:`analysis.stages.pieces` tiles by): a root that never ended (a genuine root, or
the trace's one parentless span) was open to the window's end, so the time no other span covers there is its own;
a span promoted to be the root from among several parentless spans (the longest, often a model call, when the
request's root was dropped) ended, and the window's time outside it that no other span covers is untraced
(``other``), never the promoted span's stage.

3. **Outliving work** (:mod:`analysis.spawned_tasks`, applied after these two). Work of the request that starts
   while it is open and ends after its root did (a stream the handler returned, a task it did not await) keeps its
   whole duration, and the window ends with it: the root is analysed as ending no earlier than any such work, as
   every other ancestor of it is. Work that starts after the window ended is what the request did not wait for.

What the window rests on is reported per request by :func:`request_quality`, in words by :func:`quality_notes`,
so a user knows how far to trust the numbers: an envelope window, spans analysed under another parent than they
name, work that outlived the span that started it (and how far the window runs past the root's own end), and a
root that lasts far longer than everything under it (:data:`IMPLAUSIBLE_FACTOR`), which is kept as the window
since a root's end is usually what its caller waited for, but said.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from analysis import ancestry
from analysis.ancestry import BoolArray, IntArray
from analysis.ordering import union_lengths
from analysis.spawned_tasks import MIN_OVERHANG_NS
from analysis.tree import ATTACHED, ENVELOPED, EXTENDED, ROOT_REASONS, SHIFTED, SPAWNED, SpanTree, adjusted_tree
from units import NS_PER_MS, NS_PER_S

IMPLAUSIBLE_FACTOR = 10
"""A root is implausible when it lasts more than this many times the envelope of the spans under it, and by more
than :data:`IMPLAUSIBLE_MIN_NS`: a span ended at a process's exit, or a long-lived session span, rather than the
request's own end."""
IMPLAUSIBLE_MIN_NS = NS_PER_S
"""Least excess (ns) of an implausible root over the spans under it."""
_ROOT = ROOT_REASONS.index("root")


MAX_CONTAINMENT_PAIRS = 20_000_000
"""Most (orphan, span) pairs one trace's containment search compares (:func:`attach_parentless`): about 0.1 s. A
trace past it (a 50,000-span trace of parentless spans, say) attaches its orphans to its root, as before the search."""


def attach_parentless(tree: SpanTree) -> SpanTree:
    """``tree`` with every parentless span but its trace's root analysed as the child of the innermost span holding
    it, or of the root (rule 1 of the module docstring); ``tree`` itself when every trace has one parentless span.

    Loops over the parentless spans (not all spans), each compared with its trace's spans at once, for traces within
    :data:`MAX_CONTAINMENT_PAIRS`."""
    trace_root = tree.primary_root[tree.trace]
    attached = (tree.parent < 0) & (np.arange(tree.size) != trace_root)
    if not attached.any():
        return tree
    parent = np.where(attached, trace_root, tree.parent)
    orphans = np.flatnonzero(attached)
    start, end = tree.start_ns, tree.end_ns
    duration = end - start
    # Rank of each tree: the root's first, then parentless spans by longer, earlier, first in span order.
    rank = np.full(tree.size, -1, dtype=np.int64)
    rank[orphans[np.lexsort((orphans, start[orphans], -duration[orphans]))]] = np.arange(1, orphans.size + 1)
    tree_rank = rank[tree.root]
    # The parent each orphan names and lost: orphans naming the same one are siblings, never held by each other's trees.
    lost = np.full(tree.size, "", dtype=object)
    lost[orphans] = tree.spans["parent_span_id"].gather(orphans).to_numpy()
    first = np.searchsorted(tree.trace, tree.trace[orphans], side="left")
    last = np.searchsorted(tree.trace, tree.trace[orphans], side="right")
    # The search costs a trace its orphans times its spans: past the bound its orphans stay the root's children.
    searched = np.bincount(tree.trace[orphans], minlength=tree.trace_count)[tree.trace[orphans]] * (last - first)
    within = searched <= MAX_CONTAINMENT_PAIRS
    for orphan, low, high in zip(orphans[within].tolist(), first[within].tolist(), last[within].tolist(), strict=True):
        span = np.arange(low, high)
        holds = (tree_rank[span] < rank[orphan]) & (start[span] <= start[orphan]) & (end[span] >= end[orphan])
        if lost[orphan]:
            holds &= lost[tree.root[span]] != lost[orphan]
        if holds.any():
            held = span[holds]
            parent[orphan] = held[np.lexsort((-start[held], duration[held]))[0]]
    return adjusted_tree(tree, parent, attached, ATTACHED)


def envelop_requests(tree: SpanTree, envelope: BoolArray) -> SpanTree:
    """``tree`` with its roots' windows the envelopes of their traces where ``envelope`` (per trace,
    :func:`enveloped` of ``tree``) says the root is missing or never ended (rule 2 of the module docstring, on the
    parents the spans report); ``tree`` itself when no window changes."""
    root = tree.primary_root
    low, high = _envelope(tree)
    grow = envelope & ((low < tree.start_ns[root]) | (high > tree.end_ns[root]))
    if not grow.any():
        return tree
    grown = root[grow]
    start, end = tree.start_ns.copy(), tree.end_ns.copy()
    start[grown], end[grown] = low[grow], high[grow]
    changed = np.zeros(tree.size, dtype=bool)
    changed[grown] = True
    return adjusted_tree(tree, tree.parent, changed, ENVELOPED, end_ns=end, start_ns=start)


def enveloped(unwindowed: SpanTree, unended: BoolArray) -> BoolArray:
    """Per trace, whether its window is the envelope of its spans (rule 2: its root missing or never ended), judged
    on the tree :func:`envelop_requests` reads (``TraceAnalysis._unwindowed``: server spans already moved against
    clock skew, so a skewed clock makes no root look unended); the one judgement :func:`envelop_requests`,
    :func:`own_intervals` and :func:`request_quality` take. By the root's reason, the trace's spans without a
    reported parent, and ``unended`` (:func:`unended_roots` of ``unwindowed``)."""
    missing = (_parentless(unwindowed) > 1) | (unwindowed.root_reason[unwindowed.primary_root] != _ROOT)
    return missing | unended


def _envelope(tree: SpanTree) -> tuple[IntArray, IntArray]:
    """Per trace, its spans' earliest start and latest end (ns since the epoch). A trace's spans are one run of
    rows (:attr:`analysis.tree.SpanTree.spans` is sorted by trace first)."""
    first = np.flatnonzero(np.r_[True, tree.trace[1:] != tree.trace[:-1]]) if tree.size else np.empty(0, np.int64)
    return np.minimum.reduceat(tree.start_ns, first), np.maximum.reduceat(tree.end_ns, first)


def _parentless(tree: SpanTree) -> IntArray:
    """Per trace, how many of its spans arrived without a parent in it (as the spans report their parents)."""
    reported = tree.parent if tree.reported_parent is None else tree.reported_parent
    return np.bincount(tree.trace[reported < 0], minlength=tree.trace_count)


def unended_roots(tree: SpanTree) -> BoolArray:
    """Per trace, whether its root never ended (rule 2 of the module docstring), by its interval, the trace's
    envelope and the work of the root's own tree after the root's end (:func:`_work_after_root`); judged once on the
    tree :func:`enveloped` reads and passed to it and to :func:`own_intervals`."""
    low, high = _envelope(tree)
    root = tree.primary_root
    duration = tree.end_ns[root] - tree.start_ns[root]
    others_last = (high - low > 0) & (np.bincount(tree.trace, minlength=tree.trace_count) > 1)
    after = _work_after_root(tree)
    return ((duration == 0) & others_last) | ((after > duration) & (after > MIN_OVERHANG_NS))


def _work_after_root(tree: SpanTree) -> IntArray:
    """Per trace, ns during which spans of its root's own tree (as the spans report their parents) run after the
    root's end: the union of their intervals past it. The time from the root's end to the trace's last end is not
    it: an idle gap before a late background job is no work, and a second root or an orphan whose parent was lost
    is not the root's work, so neither says that the root never ended (a root's own time then stays in its own
    interval, and the envelope's time no span covers is untraced)."""
    reported_root = tree.root if tree.reported_parent is None else ancestry.depths_and_roots(tree.reported_parent)[1]
    root = tree.primary_root[tree.trace]
    start = np.maximum(tree.start_ns, tree.end_ns[root])
    late = np.flatnonzero((reported_root == root) & (tree.end_ns > start))
    return union_lengths(tree.trace[late], tree.trace[late], (start[late], tree.end_ns[late]), tree.trace_count)


def own_intervals(
    unwindowed: SpanTree, analysed: SpanTree, envelope: BoolArray, unended: BoolArray
) -> tuple[IntArray, IntArray]:
    """Per span, the interval its own time lies in (``(start_ns, end_ns)``, ns since the epoch), for
    :func:`analysis.stages.pieces`: the span's interval in ``unwindowed`` (the tree :func:`envelop_requests` read) cut
    to its interval in ``analysed``. So a span the later adjusters widened owns none of the widening: an ancestor
    :mod:`analysis.spawned_tasks` ends with work that outlived it or started after it returned (the idle gap before a
    task queued past its parent's end is no one's, ``other``, as Jaeger UI leaves it out), a root the window's
    envelope widened (rule 2). One exception: the root of an envelope window that never ended and is the trace's own
    (a genuine root, or its one parentless span) was open to the window's end, so its own time runs there. A span
    promoted to be the root from among several parentless spans (the longest model call, when the request's root
    was dropped) did end: the envelope's time outside it that no other span covers is no one's, never that span's
    (the invariant ``tests/analysis/test_request_window.py`` checks).

    Args:
        unwindowed: the analysis tree before :func:`envelop_requests`.
        analysed: the analysis tree (``TraceAnalysis.tree``), the same spans in the same order.
        envelope: per trace, :func:`enveloped` of ``unwindowed``.
        unended: per trace, :func:`unended_roots` of ``unwindowed``.
    """
    start = np.maximum(unwindowed.start_ns, analysed.start_ns)
    end = np.minimum(unwindowed.end_ns, analysed.end_ns)
    root = unwindowed.primary_root[envelope]
    genuine = unwindowed.root_reason[root] == _ROOT
    open_ended = unended[envelope] & (genuine | (_parentless(unwindowed)[envelope] == 1))
    end[root] = np.where(open_ended, analysed.end_ns[root], end[root])
    return start, np.maximum(start, end)


def request_quality(reported: SpanTree, analysed: SpanTree, envelope: BoolArray) -> pl.DataFrame:
    """What each request's window rests on, one row per trace in trace order.

    Args:
        reported: the tree as the spans report it (``TraceAnalysis.reported_tree``).
        analysed: the analysis tree (``TraceAnalysis.tree``), its adjusters applied.
        envelope: per trace, whether the analysis made its window the envelope of its spans
            (``TraceAnalysis.enveloped``, :func:`enveloped`).

    Returns:
        trace_id (String); envelope (Boolean: the window is the envelope of the trace's spans, its root missing
        or never ended); root_reason (String, why the trace's root span is a root, :data:`analysis.tree.ROOT_REASONS`:
        ``root`` for a span with no parent ID, ``orphan`` where it names a parent the trace lacks); parentless_spans
        (UInt32, spans the trace holds without a parent in it, as reported: 1 for a whole trace, more when orphans or
        second roots were attached to the root); reattached_spans (UInt32, spans the analysis reads under another
        parent than they name); outliving_spans (UInt32, work kept whole
        that outlives the span that started it or starts after it returned: adjustment ``spawned``);
        extended_spans (UInt32, spans analysed as ending later to hold such work: adjustment ``extended``);
        shifted_spans (UInt32, spans of a server span's subtree moved into the client span that called it against
        clock skew: adjustment ``shifted``); shift_ns (Int64 ns, the largest such move, 0 when none); late_spans
        (UInt32, spans that start at or after the window's end and end after it: work the request did not wait for,
        left out of its breakdown as Jaeger UI leaves it out); early_spans (UInt32, spans that end at or before the
        window's start and start before it: a clock off, left out the same way);
        extended_ns (Int64 ns, how far the window runs past the root's reported end for such work; 0 for an
        envelope window, which holds it already); implausible_root (Boolean, :data:`IMPLAUSIBLE_FACTOR`);
        root_ns, below_root_ns (Int64 ns: the root's reported duration, and the envelope of the spans under it,
        0 when none); window_ns (Int64 ns, the request's window as analysed); duplicate_ids (UInt32, span IDs the
        trace holds more than one span under, other start, kind or name: the analysis reads the copy that ends last,
        :attr:`analysis.tree.SpanTree.duplicates`).
    """
    root = reported.primary_root
    others = np.arange(reported.size) != root[reported.trace]
    below_low = np.full(reported.trace_count, np.iinfo(np.int64).max, dtype=np.int64)
    below_high = np.full(reported.trace_count, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(below_low, reported.trace[others], reported.start_ns[others])
    np.maximum.at(below_high, reported.trace[others], reported.end_ns[others])
    below = np.maximum(below_high - below_low, 0)
    root_ns = reported.end_ns[root] - reported.start_ns[root]
    moved = analysed.parent != reported.parent
    adjustment = np.zeros(analysed.size, dtype=np.int8) if analysed.adjustment is None else analysed.adjustment
    shifted = adjustment == SHIFTED
    window_start, window_end = analysed.start_ns[analysed.primary_root], analysed.end_ns[analysed.primary_root]
    late = (analysed.start_ns >= window_end[analysed.trace]) & (analysed.end_ns > window_end[analysed.trace])
    early = (analysed.end_ns <= window_start[analysed.trace]) & (analysed.start_ns < window_start[analysed.trace])
    shift_ns = np.zeros(analysed.trace_count, dtype=np.int64)
    np.maximum.at(shift_ns, analysed.trace[shifted], np.abs(analysed.start_ns - reported.start_ns)[shifted])
    trace_ids = reported.spans["trace_id"].gather(root)
    duplicate_ids = (
        pl.DataFrame({"trace_id": trace_ids})
        .join(reported.duplicates.group_by("trace_id").len("ids"), on="trace_id", how="left", maintain_order="left")
        .get_column("ids")
        .fill_null(0)
    )
    return pl.DataFrame(
        {
            "trace_id": trace_ids,
            "envelope": envelope,
            "root_reason": pl.Series(ROOT_REASONS, dtype=pl.String).gather(reported.root_reason[root]),
            "parentless_spans": np.bincount(reported.trace[reported.parent < 0], minlength=reported.trace_count),
            "reattached_spans": np.bincount(analysed.trace[moved], minlength=analysed.trace_count),
            "outliving_spans": np.bincount(analysed.trace[adjustment == SPAWNED], minlength=analysed.trace_count),
            "extended_spans": np.bincount(analysed.trace[adjustment == EXTENDED], minlength=analysed.trace_count),
            "extended_ns": np.where(envelope, 0, np.maximum(analysed.end_ns[root] - reported.end_ns[root], 0)),
            "shifted_spans": np.bincount(analysed.trace[shifted], minlength=analysed.trace_count),
            "late_spans": np.bincount(analysed.trace[late], minlength=analysed.trace_count),
            "early_spans": np.bincount(analysed.trace[early], minlength=analysed.trace_count),
            "shift_ns": shift_ns,
            "implausible_root": (root_ns > IMPLAUSIBLE_FACTOR * below) & (root_ns - below > IMPLAUSIBLE_MIN_NS),
            "root_ns": root_ns,
            "below_root_ns": below,
            "window_ns": window_end - window_start,
            "duplicate_ids": duplicate_ids,
        },
        schema_overrides={
            "parentless_spans": pl.UInt32,
            "reattached_spans": pl.UInt32,
            "outliving_spans": pl.UInt32,
            "extended_spans": pl.UInt32,
            "extended_ns": pl.Int64,
            "shifted_spans": pl.UInt32,
            "late_spans": pl.UInt32,
            "early_spans": pl.UInt32,
            "shift_ns": pl.Int64,
            "duplicate_ids": pl.UInt32,
        },
    )


def quality_notes(quality: Mapping[str, Any]) -> list[str]:
    """The data-quality line of one request (a :func:`request_quality` row), one sentence per concern; empty when
    the window is the root's own, no span was re-attached, moved against clock skew or left out after the window, and
    no work outlived the span that started it."""
    notes = []
    if quality["envelope"]:
        # Orphans inside a root that ended: the envelope is the root's own interval, which a caller did measure.
        held = quality["root_reason"] == "root" and 0 < quality["root_ns"] == quality["window_ns"]
        latency = (
            "; the root span, which ended, holds them all, so its latency is the root's, what a caller measured"
            if held
            else ", so its latency is the traced work's, not what a caller measured"
        )
        notes.append(
            f"The request's window is the envelope of its spans (earliest start to latest end): "
            f"{_envelope_reason(quality['root_reason'], int(quality['parentless_spans']), int(quality['root_ns']))}"
            f"{latency}."
        )
    if quality["implausible_root"]:
        notes.append(
            f"The root span lasts {quality['root_ns'] / NS_PER_MS:,.1f} ms, far longer than everything under it "
            f"({quality['below_root_ns'] / NS_PER_MS:,.1f} ms): the time between is the root's own, untraced."
        )
    if quality["extended_spans"]:
        past_root = (
            f"; the request's window runs {quality['extended_ns'] / NS_PER_MS:,.1f} ms past its root span's end"
            if quality["extended_ns"]
            else ""
        )
        outliving, above = int(quality["outliving_spans"]), int(quality["extended_spans"])
        kept = (
            f"{outliving:,} such span(s) keep their whole time and the {above:,} span(s) above them are analysed as "
            "ending with them"
            if outliving
            else f"it keeps its whole time and the {above:,} span(s) above it are analysed as ending with it"
        )
        notes.append(
            "Work ran on after the span that started it had ended, or started after it returned (a stream or task "
            f"left running, a span ended early): {kept}{past_root}."
        )
    if quality["shifted_spans"]:
        notes.append(
            f"{int(quality['shifted_spans']):,} span(s) of a server whose clock disagrees with its caller's are "
            f"analysed moved into the client span that called them, by up to {quality['shift_ns'] / NS_PER_MS:,.1f} "
            "ms (clock skew, as Jaeger adjusts it); the spans are stored with the times they were sent with."
        )
    if quality["late_spans"]:
        notes.append(
            f"{int(quality['late_spans']):,} span(s) started after the request's window ended (work it did not wait "
            "for: a flush, a background job, a task queued past the answer): left out of its breakdown, as Jaeger UI "
            "leaves them out; they are on the trace page."
        )
    if quality["early_spans"]:
        notes.append(
            f"{int(quality['early_spans']):,} span(s) ended before the request's window began (a clock that is off "
            "where no client/server pair shows by how much): left out of its breakdown, as Jaeger UI leaves them out; "
            "they are on the trace page."
        )
    if quality["duplicate_ids"]:
        notes.append(
            f"{int(quality['duplicate_ids']):,} span ID(s) came with more than one span (another start, kind or name: "
            "a re-export with corrected times, or one ID given to two spans): the analysis reads the copy that ends "
            "last; the trace page shows each."
        )
    if quality["reattached_spans"]:
        notes.append(
            f"{int(quality['reattached_spans']):,} span(s) analysed under another parent than they name "
            "(orphans attached to the request, moved servers, wrapped siblings): the breakdown counts them where "
            "the request waited for them."
        )
    return notes


def _envelope_reason(root_reason: str, parentless: int, root_ns: int) -> str:
    """Why a request's window is the envelope of its spans, in words: its root's reason (``ROOT_REASONS``), how
    many of its spans arrived without a parent in the trace, and the root's reported duration (ns)."""
    if root_reason == "root":
        if parentless > 1:
            return (
                f"besides its root, {parentless - 1:,} span(s) arrived without a parent in the trace (their parent "
                "span was lost, or the trace has a second root)"
            )
        if root_ns > 0:
            return "its root span ended before most of the work under it (an end its instrumentation wrote early)"
        return "its root span never ended"
    if root_reason == "orphan":
        return f"its root span is missing ({parentless:,} span(s) name a parent the trace does not hold)"
    return "its spans' parent links loop (a span names itself or a span below it as its parent)"
