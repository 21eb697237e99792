"""Metamorphic tests on the golden captures (issue 27): each capture of a real library, broken the way the wild
breaks traces (:mod:`shape_mutations`), must keep its request's LLM share within 5 points of the wire's truth, as
the unbroken capture does (``test_capture_analysis``; a library whose unbroken capture misses the wire,
``SHARE_MISSES``, within 5 points of its unbroken analysis), and hold the request window's invariants.

All the captures (80) are stored once through the real decode path, read back, and analysed together per mutation (the
analysis is columnar over traces), so the module costs one ingest and ten analyses.
"""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl
import pytest
from shape_mutations import MUTATIONS
from test_capture_analysis import CASES, SHARE_MISSES, SHARE_TOLERANCE, truth_of

from analysis import STAGE_COLUMNS, analyze, data_quality, span_attributions, stage_breakdown_wide
from analysis.decomposition import Spans
from analysis.stage_rules import LLM_STAGES
from collector.ingest import Ingestor
from instrumented_stack.realclients.capture import capture_name
from storage.reader import ClickHouseTraceReader
from storage.tenancy import ALL_TENANTS
from storage.writer import ClickHouseTraceWriter
from testkit import ingest_otlp_json_file, migrated_database

ROOT_OWN_TIME = frozenset(
    {
        "langsmith/engine-off-nostream",
        "langsmith/engine-on-nostream",
        "langsmith/engine-on-stream",
        "pydantic_ai/engine-off-nostream",
    }
)
"""Captures whose root does 4-5 % of the request's non-LLM work outside any child span (its web framework's
handling before and after the agent): when the root is dropped that time is gone from the trace, so the envelope
of what is left reads LLM-heavier than the wire by 5-7 points. Held to the unbroken analysis instead, and so when the
root ends before its work does (``early_parents``: the time after its last child is gone too)."""
ENGINE_COLUMNS = [
    f"{stage}_ns" for stage in ("llm.tokenize", "llm.queue", "llm.prefill", "llm.decode", "llm.detokenize")
]
ROOT_DROPPING = frozenset({"drop_root", "linked_orphans"})
ROOT_OWN_TIME_LOST = ROOT_DROPPING | {"early_parents"}


class Corpus:
    """The captures' spans, their truth, and the stage-rule view of the unbroken ones."""

    def __init__(self, spans: pl.DataFrame, owner: pl.DataFrame, truth: dict[str, float]) -> None:
        self.spans = spans
        self.owner = owner
        """trace_id -> capture (String): which capture each request belongs to."""
        self.truth = truth
        """Per capture, the wire's LLM share of end-to-end time."""
        stages = span_attributions(analyze(spans)).filter(pl.col("stage").cast(pl.String).is_in([*LLM_STAGES, "tool"]))
        self.kept = frozenset(stages["span_id"].to_list())
        """Spans a filtering framework keeps: its model calls and tools."""

    def shares(self, spans: Spans) -> dict[str, float]:
        """Per capture, the LLM share of its requests' summed windows (as the Stages page reads a window)."""
        wide = stage_breakdown_wide(spans).join(self.owner, on="trace_id")
        return dict(
            wide.group_by("capture")
            .agg(pl.sum_horizontal(f"{stage}_ns" for stage in LLM_STAGES).sum() / pl.col("duration_ns").sum())
            .iter_rows()
        )

    def engine_ns(self, spans: Spans) -> dict[str, int]:
        """Per capture, the critical-path ns of the engine's phases (vLLM's ``llm_request``) over its requests."""
        wide = stage_breakdown_wide(spans).join(self.owner, on="trace_id")
        return dict(wide.group_by("capture").agg(pl.sum_horizontal(ENGINE_COLUMNS).sum()).iter_rows())


@pytest.fixture(scope="module")
def corpus(chdb_dsn: str) -> Iterator[Corpus]:
    frames, owners, truth = [], {}, {}
    with migrated_database(chdb_dsn, "shapes") as store:
        ingestor, reader = Ingestor(ClickHouseTraceWriter(store)), ClickHouseTraceReader(store)
        for driver, engine_spans, stream in CASES:
            path, measured = truth_of(driver, engine_spans, stream)
            assert all(result.rejected == 0 for result in ingest_otlp_json_file(ingestor, path))
            name = f"{driver}/{capture_name(engine_spans, stream)}"
            requests = measured["requests"]
            truth[name] = sum(r["llm_in_flight_ns"] for r in requests) / sum(r["e2e_ns"] for r in requests)
            owners |= {request["trace_id"]: name for request in requests}
            frames.extend(reader.trace(request["trace_id"], tenant=ALL_TENANTS) for request in requests)
    owner = pl.DataFrame({"trace_id": list(owners), "capture": list(owners.values())})
    yield Corpus(pl.concat(frames), owner, truth)


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_broken_capture_keeps_its_llm_share(corpus: Corpus, mutation: str) -> None:
    unbroken = corpus.shares(corpus.spans)
    broken_spans = MUTATIONS[mutation](corpus.spans, corpus.kept)
    analysis = analyze(broken_spans)
    broken = corpus.shares(analysis)
    assert set(broken) == set(corpus.truth)
    misses = {}
    for capture, truth in corpus.truth.items():
        # A library whose unbroken capture misses the wire (SHARE_MISSES: Prompt Flow) is held to its unbroken analysis.
        own = capture.split("/")[0] in SHARE_MISSES or (mutation in ROOT_OWN_TIME_LOST and capture in ROOT_OWN_TIME)
        reference = unbroken[capture] if own else truth
        if abs(broken[capture] - reference) > SHARE_TOLERANCE:
            misses[capture] = (round(broken[capture], 3), round(reference, 3))
    assert not misses, misses
    # The window's invariants on every broken request: every span is the request's, the stages sum to the window,
    # and where the root is missing or never ended the window is the envelope of the spans, and says so.
    assert analysis.tree.in_primary_tree.all()
    wide = stage_breakdown_wide(analysis)
    assert (wide.select(pl.min_horizontal(STAGE_COLUMNS)).to_series() >= 0).all()
    assert (wide.select(pl.sum_horizontal(STAGE_COLUMNS)).to_series() == wide["duration_ns"]).all()
    quality = data_quality(analysis)
    if mutation in ROOT_DROPPING | {"unended_root", "cut_root"}:
        assert quality["envelope"].all() and quality["notes"].list.len().min() > 0
    if mutation == "early_parents":
        # Every request's work outlives the spans above it: kept whole, and said (or the root never ended at all).
        assert ((quality["extended_spans"] > 0) | quality["envelope"]).all()
        assert quality["notes"].list.len().min() > 0
    if mutation == "skewed_servers":
        # An engine 5 s ahead moves none of its work: its phases are the unbroken capture's (before, a streamed call's
        # engine span, longer than the HTTP span it answers and held by no span of the caller, left the window).
        assert corpus.engine_ns(analysis) == pytest.approx(corpus.engine_ns(corpus.spans), rel=0.01)
