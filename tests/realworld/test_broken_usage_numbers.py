"""A model call whose token count is not a number a count can be (NaN, infinite, 1e300, int64's largest) leaves that
count unknown and nothing else: its trace is analysed, and the reads of its window answer (found by a fresh user's
sweep: such a count made the trace unanalysable and every diagnosis and agent-graph read of its window a 500).

Such counts are valid OTLP (proto3's JSON mapping spells NaN and the infinities as strings) and come from real SDKs:
the Vercel AI SDK reports NaN usage for several providers (vercel/ai issues 2543, 3268, 4929, 5736). The traces are
real captures (jaeger-ui's GenAI agent trace, the Vercel AI SDK's), one model call's output count broken per copy,
sent over OTLP/HTTP to a served Hotspan.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hotspan.server import RunningServer
from testkit import serve_in_process

PUBLIC = Path(__file__).parent / "public"
AGENT = PUBLIC / "jaegerui__genai_agent_trace.otlp.json"
VERCEL = PUBLIC / "vercel_ai_sdk_v6.derived.otlp.json"
BROKEN = {
    "nan": {"doubleValue": "NaN"},
    "infinity": {"doubleValue": "Infinity"},
    "minus-infinity": {"doubleValue": "-Infinity"},
    "huge-double": {"doubleValue": 1e300},
    "int64-max": {"intValue": "9223372036854775807"},
    "text-overflow": {"stringValue": "1e999"},
}
"""Broken output counts, as OTLP/JSON attribute values."""
OUTPUT_KEYS = {"gen_ai.usage.output_tokens", "ai.usage.outputTokens", "ai.usage.completionTokens"}


def _spans(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            yield from scope["spans"]


def _broken_copy(document: dict[str, Any], trace_id: str, call: str, value: dict[str, Any]) -> dict[str, Any]:
    """``document``'s spans of its first trace under ``trace_id``, the spans named ``call``'s first output count (and
    any other output key of those spans) set to ``value``; its other traces left out."""
    broken = copy.deepcopy(document)
    first = next(_spans(document))["traceId"]
    for resource in broken["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            scope["spans"] = [span for span in scope["spans"] if span["traceId"] == first]
    matched = [span for span in _spans(broken) if span["name"] == call]
    assert matched, call
    for span in _spans(broken):
        span["traceId"] = trace_id
    for span in matched[:1]:
        for attribute in span["attributes"]:
            if attribute["key"] in OUTPUT_KEYS:
                attribute["value"] = value
    return broken


@pytest.fixture(scope="module")
def server(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    running = serve_in_process(chdb_dsn, tmp_path_factory.mktemp("usage"), "usage", trace_idle_s=0.2)
    yield running
    running.stop()


def _post(server: RunningServer, document: dict[str, Any]) -> None:
    answer = httpx.post(
        f"{server.base_url}/v1/traces", content=json.dumps(document), headers={"content-type": "application/json"}
    )
    assert answer.status_code == 200 and not answer.json().get("partialSuccess", {}).get("rejectedSpans"), answer.text


def _analysed(server: RunningServer, trace_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The search rows of ``trace_ids`` once every one is analysed (its model calls known), at most 60 s."""
    deadline = time.monotonic() + 60
    while True:
        rows = httpx.get(f"{server.base_url}/api/v1/traces", params={"limit": 100}, timeout=30).json()["traces"]
        found = {row["trace_id"]: row for row in rows if row["trace_id"] in trace_ids}
        if len(found) == len(trace_ids) and all(row["llm_calls"] is not None for row in found.values()):
            return found
        assert time.monotonic() < deadline, f"not analysed: {sorted(set(trace_ids) - set(found))}"
        time.sleep(0.2)


@pytest.mark.parametrize(
    ("capture", "call", "lost"),
    [(AGENT, "chat meta-llama/Llama-3.1-8B-Instruct", 128), (VERCEL, "ai.generateText.doGenerate", 20)],
    ids=["jaeger-ui-agent", "vercel-ai-sdk"],
)
def test_a_broken_token_count_is_unknown_and_nothing_else(
    server: RunningServer, capture: Path, call: str, lost: int
) -> None:
    document = json.loads(capture.read_text())
    prefix = "a" if capture == AGENT else "b"
    intact = f"{prefix}{0:031x}"
    _post(server, _broken_copy(document, intact, call, next(iter(_output_values(document, call)))))
    broken = {name: f"{prefix}{index + 1:031x}" for index, name in enumerate(BROKEN)}
    for name, trace_id in broken.items():
        _post(server, _broken_copy(document, trace_id, call, BROKEN[name]))

    rows = _analysed(server, [intact, *broken.values()])

    whole = rows[intact]
    assert whole["output_tokens"] >= lost
    for name, trace_id in broken.items():
        row = rows[trace_id]
        assert row["llm_calls"] == whole["llm_calls"], name
        assert row["input_tokens"] == whole["input_tokens"], name
        assert (row["output_tokens"] or 0) == whole["output_tokens"] - lost, name
        stages = httpx.get(f"{server.base_url}/api/v1/traces/{trace_id}/stages", timeout=30)
        assert stages.status_code == 200, (name, stages.text)
        assert (
            stages.json()["total_ns"]
            == httpx.get(f"{server.base_url}/api/v1/traces/{intact}/stages", timeout=30).json()["total_ns"]
        )
    starts = [int(span["startTimeUnixNano"]) for span in _spans(document)]
    ends = [int(span["endTimeUnixNano"]) for span in _spans(document)]
    window = {"start_ns": min(starts) - 10**9, "end_ns": max(ends) + 10**9}
    for route in ("diagnosis", "agent-graph"):
        answer = httpx.get(f"{server.base_url}/api/v1/{route}", params=window, timeout=60)
        assert answer.status_code == 200, (route, answer.text)


def _output_values(document: dict[str, Any], call: str) -> Iterator[dict[str, Any]]:
    """The output-count values of the spans named ``call``, in order."""
    for span in _spans(document):
        if span["name"] == call:
            yield from (a["value"] for a in span["attributes"] if a["key"] in OUTPUT_KEYS)
