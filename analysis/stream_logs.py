"""An adjuster for LLM calls whose span ends before their stream does, with the stream reported by a log.

Pydantic Logfire's OpenAI integration ends a streamed call's span when the SDK hands back the stream, and
reports the streaming as a zero-length log span when it ends: ``logfire.span_type = log`` with the stream's
``duration`` (seconds) and the call's GenAI attributes and usage ("streaming response from {model} took
{duration}s"; observed with logfire 5.4, ``tests/realworld``). Left alone, the streamed time is nobody's (the
caller's own time) and the log counts as a second call.

Rule: such a log, matched by an LLM-call rule, belongs to the latest LLM call of the same parent that ended at
or before the log's time: that call's span is extended to the stream's end (the stream is the call's time), the
log is analysed as the call's child (one call, not two), and the usage it reports moves to the call, as the
call's own (the log keeps its zero length and no usage).

The stream's end is the call's end plus the log's ``duration``, at most the log's time. Logfire times the
stream from the client's first read to its last (``record_streaming`` in logfire 5.4,
``_internal/integrations/llm_providers/llm_provider.py``) and only then assembles the response's attributes and
writes the log, which can take tens of ms (78 ms on a first call in ``tests/realworld``); the first read follows
the SDK's return, so the client's work between the two is counted as the client's, not the call's.

The Codex CLI reads a call's stream in a span of its own (``receiving_stream``, a stage rule's ``llm.stream``:
stream time by the rule) beside the request's span, and reports the call's usage (GenAI semconv
``gen_ai.usage.*``) on the handler of the response's last event below it (0.171.0, ``tests/realworld``). So the
usage reported inside a span of an ``llm.stream`` rule that is no call moves, as the call's own, to the latest
LLM call that ended at or before the reporting span started below the parent of the stream span (beside it):
one report per call (the latest), and not to a call that reports its own usage.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from analysis import ancestry
from analysis.ancestry import BoolArray, IntArray
from analysis.genai import TOKEN_KEYS, USAGE_DETAILS_KEYS
from analysis.ordering import comparable_times
from analysis.spans import attribute
from analysis.stages import RuleMatch
from analysis.tree import STREAMED, SpanTree, adjusted_tree
from units import NS_PER_S

LOG_TYPE_KEY = "logfire.span_type"
LOG_TYPE = "log"
STREAM_DURATION_KEY = "duration"
"""Seconds the stream took, on Logfire's stream log."""
MAX_STREAM_S = 1e6
"""Longest stream a log's ``duration`` is read as (s): a larger value is some other span's duration, not seconds."""
USAGE_KEYS = frozenset({key for keys in TOKEN_KEYS.values() for key in keys})
"""Attributes holding one token count (:data:`analysis.genai.TOKEN_KEYS`)."""


def attach_stream_logs(tree: SpanTree, matched: RuleMatch) -> SpanTree:
    """``tree`` with streamed calls extended to their stream log and the log under its call (module docstring);
    ``tree`` itself when there is none."""
    marked, duration_s = tree.spans.select(
        (attribute(LOG_TYPE_KEY) == LOG_TYPE).alias("log"),
        attribute(STREAM_DURATION_KEY).cast(pl.Float64, strict=False).alias("duration_s"),
    ).get_columns()
    # Any span may carry a "duration" in any unit; only a stream log's (seconds) is read, and never trusted to fit.
    seconds = duration_s.to_numpy()
    marked = marked.fill_null(False).to_numpy() & np.isfinite(seconds) & (np.abs(seconds) < MAX_STREAM_S)
    duration_ns = np.where(marked, np.round(np.where(marked, seconds, 0.0) * NS_PER_S), 0).astype(np.int64)
    logs = marked & matched.call & (tree.parent >= 0) & (tree.end_ns == tree.start_ns)
    calls = np.flatnonzero(matched.call & ~logs & (tree.parent >= 0))
    log, call = _latest_call_before(tree, calls, tree.parent, np.flatnonzero(logs))
    if not log.size:
        return tree
    parent = tree.parent.copy()
    parent[log] = call
    end = tree.end_ns.copy()
    stream_end = np.clip(tree.end_ns[call] + duration_ns[log], tree.end_ns[call], tree.start_ns[log])
    np.maximum.at(end, call, stream_end)
    changed = np.zeros(tree.size, dtype=bool)
    changed[log] = changed[call] = True
    spans = tree.spans.with_columns(_moved_usage(tree.spans["attributes"], log, call))
    return adjusted_tree(replace(tree, spans=spans), parent, changed, STREAMED, end_ns=end)


def attach_stream_usage(tree: SpanTree, matched: RuleMatch) -> SpanTree:
    """``tree`` with the usage reported inside a stream span moved to the call it streams (module docstring);
    ``tree`` itself when there is none."""
    stream = matched.stream_reader
    if not stream.any():
        return tree
    reports = tree.spans.select(pl.any_horizontal(attribute(key).is_not_null() for key in USAGE_KEYS)).to_series()
    reports = reports.fill_null(False).to_numpy()
    reader = ancestry.nearest_flagged(tree.parent, tree.depth, stream)
    bearers = np.flatnonzero(reports & (reader >= 0) & ~matched.call)
    # A call that reports its own usage keeps it.
    bearer, call = _latest_call_before(tree, np.flatnonzero(matched.call & ~reports), tree.trace, bearers)
    # The call must be the stream's: below the parent of the outermost stream span around the report (beside
    # the request that carried it), not a concurrent call elsewhere in the trace.
    scope = _outermost(tree.parent, stream, reader[bearer])
    keep = _is_below(tree, call, tree.parent[scope])
    bearer, call = bearer[keep], call[keep]
    # One report per call: the latest (a second would overwrite the first).
    latest = np.lexsort((tree.start_ns[bearer], call))
    bearer, call = bearer[latest], call[latest]
    last = np.r_[call[1:] != call[:-1], True] if call.size else np.zeros(0, dtype=bool)
    bearer, call = bearer[last], call[last]
    if not bearer.size:
        return tree
    spans = tree.spans.with_columns(_moved_usage(tree.spans["attributes"], bearer, call))
    return replace(tree, spans=spans)


def _outermost(parent: IntArray, flagged: BoolArray, spans: IntArray) -> IntArray:
    """Per span of ``spans`` (flagged), the outermost of the unbroken chain of flagged ancestors above it."""
    top = spans.copy()
    while True:
        up = parent[top]
        more = (up >= 0) & flagged[np.maximum(up, 0)]
        if not more.any():
            return top
        top = np.where(more, up, top)


def _is_below(tree: SpanTree, spans: IntArray, ancestors: IntArray) -> BoolArray:
    """Per pair, whether ``ancestors[i]`` (-1: none) is an ancestor of ``spans[i]``."""
    depth = tree.depth
    target_depth = np.where(ancestors >= 0, depth[np.maximum(ancestors, 0)], np.iinfo(np.int64).max)
    reached = spans.copy()
    while (climb := depth[reached] > target_depth).any():
        reached = np.where(climb, tree.parent[reached], reached)
    return (ancestors >= 0) & (reached == ancestors) & (spans != ancestors)


def _latest_call_before(tree: SpanTree, calls: IntArray, group: IntArray, items: IntArray) -> tuple[IntArray, IntArray]:
    """The items (span indices) that have one, each with the latest of ``calls`` of the same ``group`` (per span:
    its parent, or its trace) ending at or before the item starts. One search over (group, time) keys."""
    if not calls.size or not items.size:
        return items[:0], items[:0]
    owners = np.concatenate([tree.trace[calls], tree.trace[items]])
    times = np.concatenate([tree.end_ns[calls], tree.start_ns[items]])
    (relative,), bound = comparable_times(owners, [times], int(group.max()) + 1)
    call_key = group[calls] * bound + relative[: calls.size]
    item_key = group[items] * bound + relative[calls.size :]
    order = np.argsort(call_key, kind="stable")
    calls, call_key = calls[order], call_key[order]
    position = np.searchsorted(call_key, item_key, side="right") - 1
    found = np.where(position >= 0, calls[np.maximum(position, 0)], -1)
    keep = (found >= 0) & (group[np.maximum(found, 0)] == group[items])
    return items[keep], found[keep]


def _moved_usage(attributes: pl.Series, log: np.ndarray, call: np.ndarray) -> pl.Series:
    """``attributes`` with each log's usage keys moved onto its call (one row per streamed call: few)."""
    usage = USAGE_KEYS | set(USAGE_DETAILS_KEYS)
    rows = attributes.gather(np.concatenate([log, call])).to_list()
    logs, calls = rows[: log.size], rows[log.size :]
    as_dict = [
        dict((item["key"], item["value"]) for item in row) if isinstance(row, list) else dict(row) for row in logs
    ]
    moved_logs, moved_calls = [], []
    for log_map, call_row in zip(as_dict, calls, strict=True):
        call_map = (
            dict((item["key"], item["value"]) for item in call_row) if isinstance(call_row, list) else dict(call_row)
        )
        moved_calls.append(call_map | {key: value for key, value in log_map.items() if key in usage})
        moved_logs.append({key: value for key, value in log_map.items() if key not in usage})
    values = pl.Series([*moved_logs, *moved_calls], dtype=attributes.dtype)
    # Nested columns have no scatter: gather the new values to full length and pick them where they apply.
    which = np.full(attributes.len(), -1, dtype=np.int64)
    which[np.concatenate([log, call])] = np.arange(values.len())
    replaced = values.gather(np.maximum(which, 0))
    return (
        pl.select(pl.when(pl.Series(which >= 0)).then(replaced).otherwise(attributes))
        .to_series()
        .alias(attributes.name)
    )
