"""Hotspan's analysis on the golden captures of real instrumentation libraries (``tests/realworld/captures``):
each capture stored through the real decode path into chDB, read back, analysed, and held against the ground
truth its driver measured without spans (the time an HTTP request to the model was in flight, the token counts
the server returned).

Issue 12's bar: the LLM share of end-to-end time in the critical-path view within 5 points of the truth, and
``other`` at most 5 %, for every library (Prompt Flow's share excepted, ``SHARE_MISSES``), with the engine's
spans on and off, streaming or not. The share is the
window's, as the Stages page shows it (summed LLM time over summed end-to-end latency of the capture's requests):
the truth counts an HTTP request in flight until its body is read, and the client's own processing after that
is inside the LLM span but not in the truth, a few ms per call that CPU contention can stretch in one request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from cluster_kit import layout_database

from analysis import STAGES, analyze, stage_breakdown_wide
from analysis.model_calls import model_calls
from analysis.stage_rules import LLM_STAGES
from collector.ingest import Ingestor
from instrumented_stack.realclients import DRIVERS
from instrumented_stack.realclients.capture import capture_name
from storage.reader import ClickHouseTraceReader
from storage.tenancy import ALL_TENANTS
from storage.writer import ClickHouseTraceWriter
from testkit import ingest_otlp_json_file

CAPTURES = Path(__file__).parent / "captures"
CASES = [(driver, engine, stream) for driver in sorted(DRIVERS) for engine in (True, False) for stream in (False, True)]
SHARE_TOLERANCE = 0.05
CACHED_REPORTED = frozenset(
    {
        "openinference_openai",
        "openllmetry_openai",
        "pydantic_ai",
        "langgraph",
        "langfuse",
        "langsmith",
        "agent_framework",
        "strands",
        "logfire",
        "vercel_ai",
        "google_adk",
        "mlflow_tracing",
        "anthropic_sdk",
        "openinference_anthropic",
        "openllmetry_anthropic",
        "ddtrace_llmobs",
    }
)
"""Drivers whose library records cached prompt tokens (tests/realworld/README.md)."""
STREAMED_USAGE_MISSING = frozenset({"openai_agents", "promptflow"})
"""Drivers whose library records no token counts for a streamed call: openai-agents' streamed Chat Completions
carry none; Prompt Flow counts them itself with tiktoken, whose encoding file this offline machine cannot fetch."""
SHARE_MISSES = {
    "promptflow": (
        "Prompt Flow's tracing works inside its LLM span: 14-53 ms before the request leaves and 14-33 ms after "
        "the response (~60 ms streamed, serializing every chunk), against 1-5 ms for OpenInference's and MLflow's, "
        "so the span's time is well over the wire's (tests/realworld/README.md, Not covered)"
    )
}
"""Drivers whose LLM share Hotspan cannot bring within the bar from the spans, each with the reason; their other
checks still hold, and the test fails when the share comes within the bar (the entry must then go)."""


def truth_of(driver: str, engine_spans: bool, stream: bool) -> tuple[Path, dict]:
    stem = CAPTURES / driver / capture_name(engine_spans, stream)
    return stem.with_suffix(".json"), json.loads(stem.with_name(stem.name + ".truth.json").read_text("utf-8"))


@pytest.fixture(scope="module")
def store_of_captures(chdb_dsn: str, layout: str) -> Iterator[tuple[Ingestor, ClickHouseTraceReader]]:
    """One store for the module (a migration per test took a quarter of its time): each test stores its own
    capture and reads back only its requests' traces, whose IDs no other capture holds."""
    with layout_database(chdb_dsn, layout) as store:
        yield Ingestor(ClickHouseTraceWriter(store)), ClickHouseTraceReader(store)


@pytest.mark.parametrize(("driver", "engine_spans", "stream"), CASES)
def test_llm_share_matches_the_measured_truth(
    driver: str, engine_spans: bool, stream: bool, store_of_captures: tuple[Ingestor, ClickHouseTraceReader]
) -> None:
    ingestor, reader = store_of_captures
    path, truth = truth_of(driver, engine_spans, stream)
    assert all(result.rejected == 0 for result in ingest_otlp_json_file(ingestor, path))
    ids = [request["trace_id"] for request in truth["requests"]]
    analysis = analyze(reader.traces(ids, tenant=ALL_TENANTS).drop("tenant"))
    wide = {row["trace_id"]: row for row in stage_breakdown_wide(analysis).iter_rows(named=True)}
    llm_ns = truth_llm_ns = e2e_ns = truth_e2e_ns = 0
    for request in truth["requests"]:
        row = wide[request["trace_id"]]
        duration = row["duration_ns"]
        breakdown = {stage: round(row[f"{stage}_ns"] / duration, 3) for stage in STAGES if row[f"{stage}_ns"]}
        llm_ns += sum(row[f"{stage}_ns"] for stage in LLM_STAGES)
        e2e_ns += duration
        truth_llm_ns += request["llm_in_flight_ns"]
        truth_e2e_ns += request["e2e_ns"]
        assert row["other_ns"] <= 0.05 * duration, breakdown
        assert row["llm_calls"] == request["llm_calls"]

        served = [attempt for attempt in request["llm_attempts"] if attempt["status"] == 200]
        for column, field in (("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens")):
            known = [a[field] for a in served if a[field] is not None]
            # The truth knows the counts the server returned; some libraries record none when they stream.
            if len(known) == len(served) and (engine_spans or not (driver in STREAMED_USAGE_MISSING and stream)):
                assert row[column] == sum(known), (column, breakdown)
        if driver in CACHED_REPORTED:
            assert row["cached_input_tokens"] == sum(a["cached_tokens"] or 0 for a in served)
    # Every library names the model on its call span, so every call has one: tokens vLLM's llm_request counts
    # below it (naming none) are the model's in usage per model (issue 31).
    calls = model_calls(analysis)
    assert calls["model"].null_count() == 0, calls.filter(pl.col("model").is_null())["name"].unique().to_list()
    within = llm_ns / e2e_ns == pytest.approx(truth_llm_ns / truth_e2e_ns, abs=SHARE_TOLERANCE)
    if driver in SHARE_MISSES:
        assert not within, f"{driver}'s share is now within the bar: drop it from SHARE_MISSES"
        pytest.xfail(SHARE_MISSES[driver])
    assert within, (llm_ns / e2e_ns, truth_llm_ns / truth_e2e_ns)
