"""Usage per model for the coding agents' own traces (issue 31): every token of the Codex CLI's and Claude Code's
captures (``tests/realworld/captures``) is filed under the model they used, in ``/api/v1/usage?group_by=model``.

Neither names it where the GenAI conventions do: Codex's request span ``model_client.stream_responses_api``
carries a bare ``model`` (0.171.0), and Claude Code sends no ``traceparent``, so the engine's ``llm_request``
spans (vLLM v1's: no model attribute) are traces of their own whose model only the engine's resource names
(``vllm.config.model``). The token counts are the recording proxy's (``*.truth.json``), not read from spans.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hotspan.server import RunningServer
from testkit import serve_in_process

CAPTURES = Path(__file__).parents[1] / "realworld" / "captures"
CODEX = [CAPTURES / "codex" / "engine-on-stream.json", CAPTURES / "codex" / "engine-off-stream.json"]
CLAUDE_CODE = CAPTURES / "claude_code" / "capture.json"
ANALYSED_TIMEOUT_S = 120.0
"""How long the trace pipeline may take to analyse the captures (their traces go quiet after 0.2 s here)."""


def _truth(capture: Path) -> dict[str, Any]:
    return json.loads(capture.with_suffix(".truth.json").read_text(encoding="utf-8"))


def _served(captures: list[Path]) -> dict[str, int]:
    """Model calls and input / output / cached tokens the model server answered, summed over ``captures``."""
    attempts = [
        attempt
        for capture in captures
        for request in _truth(capture)["requests"]
        for attempt in request["llm_attempts"]
        if attempt["status"] == 200
    ]
    return {
        "llm_calls": len(attempts),
        "input_tokens": sum(a["prompt_tokens"] for a in attempts),
        "output_tokens": sum(a["completion_tokens"] for a in attempts),
        "cached_input_tokens": sum(a["cached_tokens"] for a in attempts),
    }


@pytest.fixture(scope="module")
def server(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A served Hotspan holding both Codex captures and the Claude Code one, every trace analysed."""
    running = serve_in_process(chdb_dsn, tmp_path_factory.mktemp("usage_cli"), "cli", grpc_port=-1, trace_idle_s=0.2)
    try:
        traces = 0
        for capture in [*CODEX, CLAUDE_CODE]:
            answer = httpx.post(
                f"{running.base_url}/v1/traces",
                content=capture.read_bytes(),
                headers={"content-type": "application/json"},
                timeout=60,
            )
            assert answer.status_code == 200, answer.text
            traces += len(_truth(capture)["requests"])
        # Claude Code's engine spans are one trace per model call, beside its turns.
        traces += _served([CLAUDE_CODE])["llm_calls"]
        deadline = time.monotonic() + ANALYSED_TIMEOUT_S
        while _analysed(running) < traces:
            assert time.monotonic() < deadline, f"{_analysed(running)} of {traces} traces analysed"
            time.sleep(0.5)
        yield running
    finally:
        running.stop()


def _analysed(server: RunningServer) -> int:
    body = httpx.get(f"{server.base_url}/api/v1/usage", params={"start_ns": 0}, timeout=30).json()
    return sum(model["requests"] for group in body["groups"] for model in group["models"])


def _usage(server: RunningServer, group_by: str) -> dict[str, dict[str, Any]]:
    answer = httpx.get(f"{server.base_url}/api/v1/usage", params={"start_ns": 0, "group_by": group_by}, timeout=30)
    assert answer.status_code == 200, answer.text
    return {group["group"]: group for group in answer.json()["groups"]}


def _counts(group: dict[str, Any]) -> dict[str, int]:
    return {name: group[name] for name in ("llm_calls", "input_tokens", "output_tokens", "cached_input_tokens")}


def test_each_root_service_counts_what_the_model_server_answered(server: RunningServer) -> None:
    by_service = _usage(server, "service")
    assert _counts(by_service["codex_exec"]) == _served(CODEX)
    # Claude Code's requests, and the engine's own view of them (traces of their own: no traceparent).
    assert _counts(by_service["claude-code"]) == _served([CLAUDE_CODE])
    # vLLM's llm_request reports no cached tokens.
    assert _counts(by_service["vllm"]) == _served([CLAUDE_CODE]) | {"cached_input_tokens": 0}


def test_every_token_is_filed_under_the_model_the_captures_name(server: RunningServer) -> None:
    (model,) = {_truth(capture)["model"] for capture in [*CODEX, CLAUDE_CODE]}
    by_model = _usage(server, "model")
    assert list(by_model) == [model]
    (row,) = by_model[model]["models"]
    served = [_served(CODEX), _served([CLAUDE_CODE]), _served([CLAUDE_CODE]) | {"cached_input_tokens": 0}]
    assert _counts(row) == {name: sum(counts[name] for counts in served) for name in served[0]}
