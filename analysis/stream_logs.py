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
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

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


def attach_stream_logs(tree: SpanTree, matched: RuleMatch) -> SpanTree:
    """``tree`` with streamed calls extended to their stream log and the log under its call (module docstring);
    ``tree`` itself when there is none."""
    marked, duration_s = tree.spans.select(
        (attribute(LOG_TYPE_KEY) == LOG_TYPE).alias("log"),
        attribute(STREAM_DURATION_KEY).cast(pl.Float64, strict=False).alias("duration_s"),
    ).get_columns()
    duration_ns = (duration_s * NS_PER_S).round().cast(pl.Int64).fill_null(0).to_numpy()
    marked = marked.fill_null(False).to_numpy() & duration_s.is_not_null().to_numpy()
    logs = marked & matched.call & (tree.parent >= 0) & (tree.end_ns == tree.start_ns)
    log = np.flatnonzero(logs)
    calls = np.flatnonzero(matched.call & ~logs & (tree.parent >= 0))
    if not log.size or not calls.size:
        return tree
    # The latest call of the same parent ending at or before each log, by one search over (parent, time) keys.
    owners = np.concatenate([tree.trace[calls], tree.trace[log]])
    times = np.concatenate([tree.end_ns[calls], tree.start_ns[log]])
    (relative,), bound = comparable_times(owners, [times], int(tree.parent.max()) + 1)
    call_key = tree.parent[calls] * bound + relative[: calls.size]
    log_key = tree.parent[log] * bound + relative[calls.size :]
    order = np.argsort(call_key, kind="stable")
    calls, call_key = calls[order], call_key[order]
    position = np.searchsorted(call_key, log_key, side="right") - 1
    found = np.where(position >= 0, calls[np.maximum(position, 0)], -1)
    keep = (found >= 0) & (tree.parent[np.maximum(found, 0)] == tree.parent[log])
    log, call = log[keep], found[keep]
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


def _moved_usage(attributes: pl.Series, log: np.ndarray, call: np.ndarray) -> pl.Series:
    """``attributes`` with each log's usage keys moved onto its call (one row per streamed call: few)."""
    usage = {key for keys in TOKEN_KEYS.values() for key in keys} | set(USAGE_DETAILS_KEYS)
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
