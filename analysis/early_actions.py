"""An adjuster for agents that act on a model's answer while their LLM call's span is still open.

Claude Code's ``claude_code.llm_request`` span stays open 2-30 ms after the response's last byte, and the agent
starts the tool the answer asked for in that time: the tool span begins before the request span ends, and either
outlives it or lies inside it, the request span then ending after the tool (Claude Code 2.1.197 on the emulator's
Messages API, tests/realworld/captures/claude_code; aligned with the recording proxy's timings, every tool began
2-12 ms after the last byte). A streaming agent that starts a tool while the model still streams makes the same
shape. The call and the tool are siblings that overlap, and Jaeger UI's critical path (the last child finishing at
or before the next one starts) cannot step from an outliving tool back to the call: the whole call becomes the
caller's own time, so an LLM-bound turn reads as agent time. A tool inside the call is hidden under it instead,
its time counted as the model's.

Rule (Hotspan's), after the other adjusters (so an LLM span that was not current has adopted the request carrying
it, :mod:`analysis.wrappers`): an LLM call W whose first token is known (:func:`analysis.genai.first_token_ns`) and
a sibling S (same parent, neither FOLLOWS_FROM, S neither an LLM call nor the request carrying one nor an engine
span) with ``W.first_token <= S.start < W.end``, where W is the only call of that parent whose window holds S's
start (with several, S may be concurrent work of any of them, and nothing is changed):

- S outlives W (``S.end > W.end``): W's end is cut, for the analysis, to the start of its earliest such S; from
  there the caller waits on S.
- S lies inside W and W has no children: S is analysed as W's child, so W's own time before and after it stays
  the call's. A call with children (the request carrying it) leaves a contained S to :mod:`analysis.wrappers`,
  which adopts it once that request has ended.

A call whose first token is unknown is left alone: overlap alone cannot tell an action on its answer from
concurrent work. The critical path, self time and the wall-clock view all read the adjusted tree; the adjustment
is ``early_action``, and the trace page shows the adjusted times and says so.
"""

from __future__ import annotations

import numpy as np

from analysis.genai import event_columns, first_token_ns
from analysis.ordering import siblings_starting_in
from analysis.stages import NO_SPLIT, RuleMatch
from analysis.tree import EARLY_ACTION, SpanTree, adjusted_tree


def adjust_early_actions(tree: SpanTree, matched: RuleMatch) -> SpanTree:
    """``tree`` with each LLM call's early actions handled as the module docstring says (calls cut, contained
    actions re-parented); ``tree`` itself when there is none."""
    attached = (tree.parent >= 0) & ~tree.follows_from
    calls = np.flatnonzero(attached & matched.call)
    if not calls.size:
        return tree
    columns = ["start_time_unix_nano", "end_time_unix_nano", "attributes", *event_columns(tree.spans)]
    first_series = first_token_ns(tree.spans[calls].select(columns))
    known = first_series.is_not_null().to_numpy()
    calls, first = calls[known], first_series.fill_null(0).to_numpy().astype(np.int64)[known]
    request = matched.transport | (matched.split != NO_SPLIT) | matched.call
    actions = np.flatnonzero(attached & ~request & np.isin(tree.parent, tree.parent[calls]))
    # Per call, the actions of its parent starting in [first token, call end).
    pair_call, pair_action = siblings_starting_in(
        (tree.trace, tree.parent, tree.start_ns), actions, calls, (first, tree.end_ns[calls]), closed=False
    )
    single = np.bincount(pair_action, minlength=tree.size)[pair_action] == 1
    pair_call, pair_action = pair_call[single], pair_action[single]
    if not pair_call.size:
        return tree
    has_children = np.zeros(tree.size, dtype=bool)
    has_children[tree.parent[tree.parent >= 0]] = True
    outlives = tree.end_ns[pair_action] > tree.end_ns[pair_call]
    contained = ~outlives & ~has_children[pair_call]
    end = tree.end_ns.copy()
    np.minimum.at(end, pair_call[outlives], tree.start_ns[pair_action[outlives]])
    parent = tree.parent.copy()
    parent[pair_action[contained]] = pair_call[contained]
    changed = end != tree.end_ns
    changed[pair_action[contained]] = True
    return adjusted_tree(tree, parent, changed, EARLY_ACTION, end_ns=end) if changed.any() else tree
