"""Fixtures for real instrumentation libraries driving the emulator: ``live_driver`` runs a driver against a
served Hotspan (``hotspan_server`` of the root conftest) and returns its result and the stored traces."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from realworld_kit import LiveRun, engine_spans_expected, shape_ready, wait_for_trace

from instrumented_stack.realclients.harness import run_driver

if TYPE_CHECKING:
    from hotspan.server import RunningServer


@pytest.fixture
def live_driver(hotspan_server: RunningServer, tmp_path: Path) -> Callable[..., LiveRun]:
    """``live_driver(driver, stream=..., engine_spans=..., http_spans=...)``: two user requests through the
    driver process, spans exported to the served Hotspan; returns the result and each trace's stored spans
    (waited for until the trace is whole)."""

    def run(driver: str, *, stream: bool, engine_spans: bool, http_spans: bool = True) -> LiveRun:
        result = run_driver(
            driver,
            hotspan_server.base_url,
            tmp_path / f"{driver}.truth.json",
            stream=stream,
            engine_spans=engine_spans,
            http_spans=http_spans,
        )
        traces = {}
        for request in result.truth["requests"]:
            engine = engine_spans_expected(driver, request["llm_calls"], engine_spans)
            traces[request["trace_id"]] = wait_for_trace(
                hotspan_server.base_url, request["trace_id"], lambda spans, n=engine: shape_ready(spans, n)
            )
        return result, traces

    return run
