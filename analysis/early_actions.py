"""An adjuster for agents that act on a streamed answer before their LLM call's span ends.

A streaming agent runs a tool as soon as the stream has delivered the tool-use block, while the rest of the
stream (the closing events, usage) still arrives and the call's span stays open: Claude Code starts
``claude_code.tool`` ~10 ms before its ``claude_code.llm_request`` ends (observed with Claude Code 2.1.197 on
the emulator's Messages API, tests/realworld/claude_code). The call and the tool are siblings that overlap, and
Jaeger UI's critical path (the last child finishing at or before the next one starts) cannot step from the tool
back to the call: the whole call becomes the caller's own time, so an LLM-bound turn reads as agent time.

Claude Code also keeps the
call's span open while a short tool runs and ends it after the tool (the same capture, other turns): the tool
lies inside the call, which the critical path then credits with the tool's time too.

Rule (Hotspan's): an LLM call W whose first token is known (:func:`analysis.genai.first_token_ns`) and a
sibling S (same parent, neither FOLLOWS_FROM, S neither an LLM call nor the request carrying one nor an
engine span) with ``W.first_token <= S.start < W.end``, and either ``S.end > W.end`` or W childless: the
caller acted on W's stream. W's end is cut, for the analysis, to the start of its earliest such S: from there
the caller waits on S, which is what the critical path, self time and the wall-clock view then say (what is
left of W after a contained S is the caller's own time). A sibling inside a call that has children (the
request carrying it) is left to :mod:`analysis.wrappers`, which adopts it once that request has ended; a call
whose first token is unknown is left alone, since overlap alone cannot tell an early action from concurrent
work. The span's reported times are kept on the
trace page's span detail; the adjustment is ``cut``.
"""

from __future__ import annotations

import numpy as np

from analysis.genai import first_token_ns
from analysis.ordering import siblings_starting_in
from analysis.stages import NO_SPLIT, RuleMatch
from analysis.tree import CUT, SpanTree, adjusted_tree


def cut_at_early_actions(tree: SpanTree, matched: RuleMatch) -> SpanTree:
    """``tree`` with each LLM call's end cut to the earliest sibling its caller started on the call's stream
    and waited on after it (module docstring); ``tree`` itself when there is none."""
    attached = (tree.parent >= 0) & ~tree.follows_from
    calls = np.flatnonzero(attached & matched.call)
    if not calls.size:
        return tree
    event_columns = [name for name in ("event_names", "event_times_unix_nano") if name in tree.spans.columns]
    frame = tree.spans[calls].select("start_time_unix_nano", "end_time_unix_nano", "attributes", *event_columns)
    first_series = first_token_ns(frame)
    known = first_series.is_not_null().to_numpy()
    calls, first = calls[known], first_series.fill_null(0).to_numpy().astype(np.int64)[known]
    request = matched.transport | (matched.split != NO_SPLIT) | matched.call
    actions = np.flatnonzero(attached & ~request & np.isin(tree.parent, tree.parent[calls]))
    if not calls.size or not actions.size:
        return tree
    # Per call, the actions of its parent starting in [first token, call end).
    pair_call, pair_action = siblings_starting_in(
        (tree.trace, tree.parent, tree.start_ns), actions, calls, (first, tree.end_ns[calls]), closed=False
    )
    childless = np.ones(tree.size, dtype=bool)
    childless[tree.parent[tree.parent >= 0]] = False
    cut = (tree.end_ns[pair_action] > tree.end_ns[pair_call]) | childless[pair_call]
    pair_call, pair_action = pair_call[cut], pair_action[cut]
    if not pair_call.size:
        return tree
    end = tree.end_ns.copy()
    np.minimum.at(end, pair_call, tree.start_ns[pair_action])
    changed = end != tree.end_ns
    return adjusted_tree(tree, tree.parent, changed, CUT, end_ns=end) if changed.any() else tree
