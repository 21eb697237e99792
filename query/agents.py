"""The agent graph of a window's requests: each trace's graph (:mod:`analysis.agent_graph`) summed over the traces a
search finds, so an operator sees which agents call which models and tools across many requests, not one.

One read: the spans of the found traces (``TraceReader.search_spans``, bounded by the reader's span budget), all
analysed together. The sum is over those traces only (a search's ``limit``, newest first), and the answer says how
many they were.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis import analyze
from analysis.agent_graph import EDGE_SCHEMA, agent_graph
from analysis.stage_rules import StageRules
from storage.reader import TraceQuery, TraceReader


@dataclass(frozen=True)
class WindowAgentGraph:
    """Agent graph edges (:data:`analysis.agent_graph.EDGE_SCHEMA`, critical times on each request's own critical
    path) summed over ``traces`` traces."""

    traces: int
    edges: pl.DataFrame


def window_agent_graph(
    reader: TraceReader, rules: StageRules, query: TraceQuery, *, tenant: str | None
) -> WindowAgentGraph:
    """The agent graph summed over the traces ``query`` finds for ``tenant``.

    Raises:
        storage.clickhouse.ReadLimitError: the traces hold more spans than the reader's budget.
        storage.clickhouse.StorageError: the read failed.
    """
    spans = reader.search_spans(query, tenant=tenant)
    if not spans.height:
        return WindowAgentGraph(0, pl.DataFrame(schema=EDGE_SCHEMA))
    return WindowAgentGraph(spans["trace_id"].n_unique(), agent_graph(analyze(spans, rules)))
