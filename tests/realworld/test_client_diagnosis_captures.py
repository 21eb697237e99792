"""The client-side causes on stored traces that show none of their faults: the golden captures of the real
instrumentation libraries and of the Codex CLI (``captures/``, clean runs, engine spans on and off, streaming or
not) and the public GenAI / agent captures (``public/``). Each file goes through the real importer into chDB under
its own tenant and ``diagnose_window`` reads it back, as the API would.

Nothing is raised on the captures, and no cause (client- or engine-side) is above ``info`` on any of them: the
false-alarm count on captured clean traces (issue 29). On the public files the only client-side finding is
``llm_bound`` on the two whose requests are model calls and nothing else (Vercel AI SDK: ``ai.generateText``
around its one ``doGenerate``; Langfuse: two requests that are a lone ``openai.chat`` span): true by
construction, and checked against the share of each request its model calls cover, computed here from the raw
file. any-agent's OpenAI trace is model calls for 99.7 % of its one request, too few requests for ``llm_bound``
(``min_requests`` 2).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from diagnosis import CLIENT_SIDE_CAUSES, DiagnosisReport, diagnose_window
from hotspan.importer import StoreSink, import_paths
from instrumented_stack.realclients import DRIVERS
from instrumented_stack.realclients.capture import capture_name
from storage.clickhouse import ClickHouse
from storage.reader import ClickHouseTraceReader
from storage.writer import ClickHouseTraceWriter
from testkit import migrated_database

HERE = Path(__file__).parent
CAPTURES = [
    HERE / "captures" / driver / f"{capture_name(engine, stream)}.json"
    for driver in sorted(DRIVERS)
    for engine in (True, False)
    for stream in (False, True)
] + [HERE / "captures" / "codex" / f"{capture_name(engine, stream=True)}.json" for engine in (True, False)]
PUBLIC = sorted(path for path in (HERE / "public").iterdir() if path.suffix == ".json")
MODEL_CALL_NAMES = {
    "vercel_ai_sdk_v6.derived.otlp.json": (
        "ai.generateText.doGenerate",
        "ai.generateObject.doGenerate",
        "ai.streamText.doStream",
    ),
    "langfuse_otel_captures.derived.otlp.json": ("my-generation", "openai.chat", "openai.chat.completions"),
}
"""Public files whose requests are all model calls: the span names of their model calls (as each file's
convention names them: the Vercel AI SDK's provider calls, Langfuse's generation and the OpenAI SDK's calls)."""


@pytest.fixture(scope="module")
def captures_store(chdb_dsn: str) -> Iterator[ClickHouse]:
    with migrated_database(chdb_dsn, "captures") as ch:
        yield ch


def diagnose_file(store: ClickHouse, path: Path) -> DiagnosisReport:
    tenant = f"file-{uuid.uuid4().hex[:8]}"
    summary = import_paths([path], StoreSink(ClickHouseTraceWriter(store), tenant), progress=False)
    assert summary.rejected == 0, summary.problems
    report = diagnose_window(ClickHouseTraceReader(store), tenant=tenant)
    assert report.errors == []
    return report


def covered_share(path: Path, names: tuple[str, ...]) -> float:
    """Summed over the file's requests that make a model call: the union of their model calls' intervals,
    cut to the root span, over the roots' durations."""
    spans = [
        span
        for resource in json.loads(path.read_text(encoding="utf-8"))["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    covered = total = 0
    for root in (span for span in spans if not span.get("parentSpanId")):
        start, end = int(root["startTimeUnixNano"]), int(root["endTimeUnixNano"])
        calls = sorted(
            (max(int(s["startTimeUnixNano"]), start), min(int(s["endTimeUnixNano"]), end))
            for s in spans
            if s["traceId"] == root["traceId"] and s["name"] in names
        )
        if not calls:
            continue
        total += end - start
        reach = start
        for low, high in calls:
            covered += max(0, high - max(low, reach))
            reach = max(reach, high)
    return covered / total


@pytest.mark.parametrize("path", CAPTURES, ids=[f"{p.parent.name}/{p.stem}" for p in CAPTURES])
def test_clean_captures_raise_no_client_finding(path: Path, captures_store: ClickHouse) -> None:
    report = diagnose_file(captures_store, path)
    assert report.trace_count == 2
    assert [f.cause for f in report.findings if f.cause in CLIENT_SIDE_CAUSES] == []
    assert above_info(report) == []


def above_info(report: DiagnosisReport) -> list[tuple[str, str, float]]:
    return [(f.cause, f.severity, f.confidence) for f in report.findings if f.severity != "info"]


def test_a_claude_code_capture_raises_only_that_its_turns_are_llm_bound(captures_store: ClickHouse) -> None:
    # Claude Code 2.1.197's turns on the emulator (captures/claude_code): 3 turns, and the engine's 12 requests in
    # traces of their own (Claude Code sends no traceparent). Its permission waits (claude_code.tool.blocked_on_user,
    # 3-16 ms) are waits, not the loop's CPU: before wait_names they were an orchestration_cpu_hotspot warning.
    report = diagnose_file(captures_store, HERE / "captures" / "claude_code" / "capture.json")
    assert report.trace_count == 15
    assert [(f.cause, f.severity) for f in report.findings] == [("llm_bound", "info")]


@pytest.mark.parametrize("path", PUBLIC, ids=[p.name for p in PUBLIC])
def test_public_captures_raise_only_what_they_show(path: Path, captures_store: ClickHouse) -> None:
    report = diagnose_file(captures_store, path)
    assert above_info(report) == []
    found = {f.cause: f for f in report.findings if f.cause in CLIENT_SIDE_CAUSES}
    names = MODEL_CALL_NAMES.get(path.name)
    if names is None:
        assert found == {}
        return
    assert list(found) == ["llm_bound"]
    share = found["llm_bound"].evidence["llm_share"]
    assert isinstance(share, float) and share >= 0.9
    assert share == pytest.approx(covered_share(path, names), abs=0.02)
