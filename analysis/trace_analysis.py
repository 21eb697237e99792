"""One span frame's analysis, each step computed once and shared by every view that needs it.

Every public function of :mod:`analysis.decomposition` and :mod:`analysis.statistics` accepts a span frame,
a :class:`~analysis.tree.SpanTree` or a :class:`TraceAnalysis`; callers that want several views of the same
spans (the trace pipeline, the benchmark) build one :class:`TraceAnalysis` and pass it to each.
"""

from __future__ import annotations

from functools import cached_property

import polars as pl

from analysis.ancestry import BoolArray, IntArray
from analysis.critical_path import Sections, critical_path_sections
from analysis.early_actions import adjust_early_actions
from analysis.remote_spans import adjust_remote_spans
from analysis.request_window import attach_parentless, envelop_requests, enveloped, own_intervals, unended_roots
from analysis.self_time import self_times
from analysis.spawned_tasks import extend_to_outliving_work
from analysis.stage_rules import StageRules, load_stage_rules
from analysis.stages import Assignment, Pieces, RuleMatch, match_rules, pieces, refine
from analysis.stream_logs import attach_stream_logs, attach_stream_usage
from analysis.tree import SpanTree, as_tree
from analysis.wall_clock import Shares, wall_clock_shares
from analysis.wrappers import adopt_wrapped_siblings


class TraceAnalysis:
    """Lazily computed analysis of the traces in one :class:`~analysis.tree.SpanTree`.

    :attr:`reported_tree` is the tree as the spans report it; :attr:`tree`, which every view reads, is that
    tree after the adjusters (:mod:`analysis.request_window`, :mod:`analysis.stream_logs`,
    :mod:`analysis.remote_spans`, :mod:`analysis.spawned_tasks`, :mod:`analysis.wrappers`,
    :mod:`analysis.early_actions`), identical unless a trace has several parentless spans or a missing or unended
    root, a stream log ends a call, a server span outlives its client span, work outlives or starts after the
    span that started it, a childless wrapper span contains sibling work or a caller acts on an LLM call's answer
    before its span ends. Rules match spans on the reported tree; what the tree refines (a traced LLM call, a
    request carrying a call) is read from the analysis tree.

    Not thread-safe while its properties are first computed (they are cached on the instance); read-only
    afterwards.
    """

    def __init__(self, tree: SpanTree, rules: StageRules | None = None) -> None:
        self.reported_tree = tree
        self.rules = rules if rules is not None else load_stage_rules()

    @cached_property
    def matched(self) -> RuleMatch:
        """Per span, what the stage rules say of it on its own (:func:`analysis.stages.match_rules`)."""
        return match_rules(self.reported_tree, self.rules)

    @cached_property
    def tree(self) -> SpanTree:
        """The analysis tree: :attr:`reported_tree` with its parentless spans under the trace's root
        (:mod:`analysis.request_window`), streamed calls ended by their stream logs (:mod:`analysis.stream_logs`),
        server spans that outlive their client lifted or shifted (:mod:`analysis.remote_spans`, before the window
        is read, so a skewed clock does not stretch it), the root's window the trace's envelope where the root is
        missing or never ended, the ancestors of work that outlives its parent or starts after it returned, the
        root among them, ending no earlier than that work (:mod:`analysis.spawned_tasks`), wrapped siblings under
        their wrappers (:mod:`analysis.wrappers`, a wrapper then covering what it adopted), then LLM
        calls cut, or given the step inside them, where their caller acted on their answer
        (:mod:`analysis.early_actions`)."""
        spawned = extend_to_outliving_work(envelop_requests(self._unwindowed, self.enveloped))
        wrapped = adopt_wrapped_siblings(spawned, self.matched)
        return adjust_early_actions(wrapped, self.matched)

    @cached_property
    def _unwindowed(self) -> SpanTree:
        """The analysis tree's first adjusters, before the request's window is read: parentless spans attached,
        streamed calls ended by their stream logs, server spans that outlive their client lifted or shifted."""
        attached = attach_parentless(self.reported_tree)
        streamed = attach_stream_usage(attach_stream_logs(attached, self.matched), self.matched)
        return adjust_remote_spans(streamed, self.matched)

    @cached_property
    def unended(self) -> BoolArray:
        """Per trace in trace order, whether its root never ended (:func:`analysis.request_window.unended_roots`, on
        the tree the window is read from)."""
        return unended_roots(self._unwindowed)

    @cached_property
    def enveloped(self) -> BoolArray:
        """Per trace in trace order, whether its window is the envelope of its spans, its root missing or never
        ended (:func:`analysis.request_window.enveloped`, on the tree the window is read from)."""
        return enveloped(self._unwindowed, self.unended)

    @cached_property
    def own_intervals(self) -> tuple[IntArray, IntArray]:
        """Per span, the interval its own time lies in, ns since the epoch (:func:`analysis.request_window.
        own_intervals`): its interval in :attr:`tree`, but for a trace's root that the window's envelope widened."""
        return own_intervals(self._unwindowed, self.tree, self.enveloped, self.unended)

    @cached_property
    def self_time_ns(self) -> IntArray:
        """Per span, self time in ns (:mod:`analysis.self_time`): its own interval (:attr:`own_intervals`) less
        what its children's intervals in :attr:`tree` cover. A root whose window is its trace's envelope but which
        ended owns none of the window's untraced time, an ancestor analysed as ending with outliving work none of
        its widening."""
        return self_times(self.tree, self.own_intervals)

    @cached_property
    def sections(self) -> Sections:
        """Critical-path sections of every tree (:mod:`analysis.critical_path`)."""
        return critical_path_sections(self.tree)

    @cached_property
    def assignment(self) -> Assignment:
        """Per span, the deciding stage rule (:mod:`analysis.stages`)."""
        return refine(self.tree, self.matched)

    @cached_property
    def pieces(self) -> Pieces:
        """Every span tiled into stage pieces over its own interval (:attr:`own_intervals`; the rest of its interval
        in :attr:`tree` is `other`) (:mod:`analysis.stages`)."""
        return pieces(self.tree, self.assignment, self.own_intervals)

    @cached_property
    def wall_clock(self) -> Shares:
        """The wall-clock profiler's shares (:mod:`analysis.wall_clock`)."""
        return wall_clock_shares(self.tree, self.pieces)


def analyze(spans: pl.DataFrame | SpanTree | TraceAnalysis, rules: StageRules | None = None) -> TraceAnalysis:
    """A :class:`TraceAnalysis` of ``spans``; ``spans`` itself when it already is one and ``rules`` is None
    or its own table."""
    if isinstance(spans, TraceAnalysis):
        return spans if rules is None or rules == spans.rules else TraceAnalysis(spans.reported_tree, rules)
    return TraceAnalysis(as_tree(spans), rules)
