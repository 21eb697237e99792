"""The extension point of the trace pipeline: :class:`TraceProcessor`.

The pipeline (:class:`processors.pipeline.trace_pipeline.TracePipeline`) picks up traces once they have been quiet for
``trace_idle_s``, reads their spans in batches, analyses each batch once (:func:`analysis.analyze`) and hands
the same spans and analysis to every processor in its list, in order, before it records the batch as done.
A processor derives whatever it needs from whole traces (service-graph edges, span metrics, ...) and stores it.
Processors see every trace of the batch, those tail sampling is about to drop included (the pipeline deletes
their spans only after every processor has run), so what they count covers all traffic.

Contract of :meth:`TraceProcessor.process`:

- **Input.** ``spans``: every span of the batch's traces, all of one owner tenant, with the columns of
  ``storage.reader.TraceReader.trace`` plus ``tenant`` (String, the owner tenant, ``storage.tenancy``; the same
  on every row), ordered by trace ID then start. A span stored twice (an exporter's retry) appears twice;
  ``analysis.tree.spans`` holds each once. ``analysis``: :func:`analysis.analyze` of ``spans`` with the
  configured stage rules; read its cached views, never mutate either argument.
- **Re-analysis.** A trace is analysed again when late spans arrive after it was processed, and then it is
  in ``spans`` again, whole. ``first_seen`` holds the trace IDs of the batch analysed for the first time: a
  processor that counts traces (rollups, edges per call) processes only those, so each trace is counted once;
  one that keeps per-trace state (a ``ReplacingMergeTree`` keyed by trace) may rewrite every trace.
- **Failure.** Raising aborts the batch before it is recorded: the whole batch, unchanged, is offered again at
  the next poll (to every processor, in the same order). Delivery is therefore at least once; a processor
  that must not double count makes its writes idempotent (e.g. an insert deduplication token derived from the
  batch's trace IDs) or tolerates the rare repeat.
- **Sampled out.** ``sampled_out`` holds the batch's trace IDs tail sampling is about to drop: counted like
  the others, but nothing a processor keeps may point a user at them (an exemplar's trace ID would open a trace
  that is gone).
- **Threads.** Called from the pipeline's single worker thread (or the caller of ``run_once``); blocking I/O
  is fine, and each call finishes before the next starts.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import polars as pl

from analysis import TraceAnalysis


@runtime_checkable
class TraceProcessor(Protocol):
    """Derives and stores something from whole, quiet traces (contract in the module docstring)."""

    def process(
        self, spans: pl.DataFrame, analysis: TraceAnalysis, first_seen: set[str], sampled_out: frozenset[str]
    ) -> None:
        """Process one batch of traces of one owner tenant.

        Args:
            spans: the batch's spans (columns of ``TraceReader.trace`` plus ``tenant``).
            analysis: their analysis.
            first_seen: the batch's trace IDs analysed for the first time.
            sampled_out: the batch's trace IDs tail sampling drops (module docstring).

        Raises:
            Exception: anything; the batch is retried at the next poll.
        """
        ...
