"""The device check (``tools/device_check.py``): its whole path run against the emulator's own server process,
its fast answer without vLLM, its judge of the spans and its dependency probe. Real vLLM needs a GPU: the check is
run by hand there (``instrumented_stack/README.md``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hotspan.server import RunningServer
from instrumented_stack.engine.vllm_backend import probe_vllm
from instrumented_stack.engine.vllm_span import LLM_REQUEST_ATTRIBUTES, VllmSpanAttributes
from tools.device_check import judge_spans, missing_modules, run_device_check

MODEL = "test-model"


def test_device_check_passes_against_the_emulators_process(hotspan_server: RunningServer, tmp_path: Path) -> None:
    verdict = run_device_check("emulator", server=hotspan_server, requests=2, wait_s=30, log_dir=tmp_path)
    assert verdict.ok, verdict.to_json()
    line = json.loads(verdict.to_json())
    assert line["llm_request_spans"] == line["nested_under_client_span"] == line["attribute_set_equal"] == 2
    assert line["prompt_tokens_match"] == 2 and line["service_names"] == ["vllm"] and line["engine_exit_status"] == 0
    assert (tmp_path / "engine.log").is_file()


def test_device_check_reports_vllm_missing_fast() -> None:
    if probe_vllm().usable:
        pytest.skip("this machine can run vLLM")
    started = time.monotonic()
    verdict = run_device_check("vllm")
    assert time.monotonic() - started < 10
    assert (verdict.ok, verdict.verdict) == (False, "vllm missing")
    assert any("not installed" in reason for reason in verdict.details["missing"])


def test_device_check_judge_names_wrong_parents_and_attribute_differences() -> None:
    trace = "a" * 32
    attributes = dict.fromkeys(LLM_REQUEST_ATTRIBUTES - {VllmSpanAttributes.RESPONSE_FINISH_REASONS}, "1")
    rows = [
        {"trace_id": trace, "span_id": "c" * 16, "parent_span_id": "r" * 16, "name": f"chat {MODEL}", "kind": "Client",
         "service_name": "agent", "attributes": {}},
        {"trace_id": trace, "span_id": "e" * 16, "parent_span_id": "r" * 16, "name": "llm_request", "kind": "Server",
         "service_name": "vllm", "attributes": attributes | {"gen_ai.response.model": MODEL}},
    ]  # fmt: skip
    judged = judge_spans(rows, [trace], MODEL)
    assert not judged["ok"] and judged["nested_under_client_span"] == 0 and judged["attribute_set_equal"] == 0
    assert judged["missing_attributes"] == [VllmSpanAttributes.RESPONSE_FINISH_REASONS]
    assert judged["extra_attributes"] == ["gen_ai.response.model"]
    assert judge_spans([], [trace], MODEL)["problems"] == [f"{trace}: 0 llm_request spans, expected 1"]


def test_device_check_names_missing_dependencies_without_importing_them() -> None:
    assert missing_modules(["json", "no_such_module_xyz", "no_such_package_xyz.sub"]) == [
        "no_such_module_xyz",
        "no_such_package_xyz.sub",
    ]
    assert missing_modules() == [], "the test environment has every dependency of the check"
