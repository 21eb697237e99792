"""Tokens and cost over a served Hotspan: trace search results carry each analysed request's model usage, and
``/api/v1/usage`` sums it per group and model, priced by a user's own price table (``HOTSPAN_PRICES``).

Input: a real capture (pydantic-ai through the OpenAI SDK against the vLLM emulator, engine spans off,
``tests/realworld/captures``), whose driver recorded the token counts the server returned.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cluster_kit import served_on
from pricing_kit import euro_prices, euros

from hotspan.server import RunningServer

CAPTURE = Path(__file__).parents[1] / "realworld" / "captures" / "pydantic_ai" / "engine-off-nostream"


@pytest.fixture(scope="module")
def server(chdb_dsn: str, layout: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("usage_api")
    with served_on(chdb_dsn, layout, directory, "u", prices_path=euro_prices(directory)) as running:
        body = CAPTURE.with_suffix(".json").read_text()
        answer = httpx.post(
            f"{running.base_url}/v1/traces", content=body, headers={"content-type": "application/json"}, timeout=30
        )
        assert answer.status_code == 200, answer.text
        yield running


def truth() -> list[dict]:
    """Per request, the token counts the model server returned (the driver's truth, not from spans)."""
    return [
        {
            "trace_id": r["trace_id"],
            "input": sum(a["prompt_tokens"] for a in r["llm_attempts"]),
            "output": sum(a["completion_tokens"] for a in r["llm_attempts"]),
            "cached": sum(a["cached_tokens"] for a in r["llm_attempts"]),
            "calls": r["llm_calls"],
        }
        for r in truth_requests()
    ]


def truth_requests() -> list[dict]:
    return json.loads(CAPTURE.with_name(CAPTURE.name + ".truth.json").read_text())["requests"]


def searched(server: RunningServer) -> list[dict]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        traces = httpx.get(f"{server.base_url}/api/v1/traces", params={"limit": 50}, timeout=30).json()["traces"]
        if len(traces) == len(truth_requests()) and all(t["llm_calls"] is not None for t in traces):
            return traces
        time.sleep(0.2)
    raise AssertionError("the trace pipeline did not analyse the capture in time")


def test_search_results_carry_tokens_and_cost(server: RunningServer) -> None:
    results = {t["trace_id"]: t for t in searched(server)}
    for expected in truth():
        row = results[expected["trace_id"]]
        assert (row["llm_calls"], row["input_tokens"], row["output_tokens"], row["cached_input_tokens"]) == (
            expected["calls"],
            expected["input"],
            expected["output"],
            expected["cached"],
        )
        assert row["currency"] == "EUR"
        assert row["cost"] == pytest.approx(euros(expected["input"], expected["cached"], expected["output"]))
        assert row["dominant_stage"] == "llm.call"


@pytest.mark.both_layouts
def test_usage_per_model_and_in_all(server: RunningServer) -> None:
    searched(server)
    expected = truth()
    total_in, total_out = sum(e["input"] for e in expected), sum(e["output"] for e in expected)
    total_cached = sum(e["cached"] for e in expected)
    body = httpx.get(f"{server.base_url}/api/v1/usage", params={"start_ns": 0}, timeout=30).json()
    assert body["currency"] == "EUR"
    (group,) = body["groups"]
    assert (group["llm_calls"], group["input_tokens"], group["output_tokens"], group["cached_input_tokens"]) == (
        sum(e["calls"] for e in expected),
        total_in,
        total_out,
        total_cached,
    )
    assert group["cost"] == pytest.approx(euros(total_in, total_cached, total_out))
    by_model = httpx.get(f"{server.base_url}/api/v1/usage", params={"start_ns": 0, "group_by": "model"}, timeout=30)
    assert [g["group"] for g in by_model.json()["groups"]] == ["meta-llama/Llama-3.1-8B-Instruct"]
