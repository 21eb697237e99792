"""Run one driver end to end: an emulator in this process, the driver in its own, spans to one OTLP endpoint.

The emulator exports its ``llm_request`` spans (when ``engine_spans``) to the same endpoint as the driver,
and both have flushed by the time :func:`run_driver` returns (the driver process has exited; stopping the
emulator shuts its span processor down).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from instrumented_stack.engine.throttle import ThrottleConfig
from instrumented_stack.realclients.emulator import MODEL, emulator_config, serve_emulator
from instrumented_stack.telemetry import otlp_span_processor


@dataclass(frozen=True, slots=True)
class DriverResult:
    """What one driver run produced: its trace ids, the ground truth (the truth file's content) and how long
    the driver process took (**seconds**, wall clock, start-up included)."""

    driver: str
    trace_ids: list[str]
    truth: dict[str, Any]
    truth_path: Path
    wall_s: float


class DriverFailed(RuntimeError):
    """The driver process failed; the message quotes the end of its output."""


def run_driver(
    driver: str,
    otlp_endpoint: str,
    truth_out: Path,
    *,
    stream: bool = False,
    engine_spans: bool = True,
    http_spans: bool = True,
    requests: int = 2,
    speed: float = 1.0,
    throttle: ThrottleConfig | None = None,
    timeout_s: float = 180.0,
) -> DriverResult:
    """Serve an emulator, run ``python -m instrumented_stack.realclients <driver>`` against it, return the result.

    Raises:
        DriverFailed: the driver exited non-zero or did not finish within ``timeout_s`` seconds.
    """
    config = emulator_config(engine_spans=engine_spans, speed=speed, throttle=throttle)
    with serve_emulator(config, otlp_span_processor(otlp_endpoint)) as llm_url:
        command = [
            sys.executable,
            "-m",
            "instrumented_stack.realclients",
            driver,
            "--llm-url",
            llm_url,
            "--otlp-endpoint",
            otlp_endpoint,
            "--model",
            MODEL,
            "--requests",
            str(requests),
            "--engine-spans",
            "on" if engine_spans else "off",
            "--http-spans",
            "on" if http_spans else "off",
            "--truth-out",
            str(truth_out),
        ]
        if stream:
            command.append("--stream")
        started = time.monotonic()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as error:
            raise DriverFailed(f"{driver} did not finish within {timeout_s} s") from error
        wall_s = time.monotonic() - started
    if done.returncode != 0:
        raise DriverFailed(f"{driver} exited {done.returncode}: {(done.stdout + done.stderr)[-4000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    truth = json.loads(truth_out.read_text(encoding="utf-8"))
    return DriverResult(driver, summary["trace_ids"], truth, truth_out, wall_s)
