"""Run one driver end to end: an emulator in this process, the driver in its own, spans to one OTLP endpoint.

The emulator exports its ``llm_request`` spans (when ``engine_spans``) to the same endpoint as the driver,
and both have flushed by the time :func:`run_driver` returns (the driver process has exited; stopping the
emulator shuts its span processor down).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from instrumented_stack.engine.throttle import ThrottleConfig
from instrumented_stack.env import module_process_env
from instrumented_stack.realclients.common import AppSettings
from instrumented_stack.realclients.emulator import MODEL, emulator_config, serve_emulator
from instrumented_stack.realclients.faults import apply_client_faults
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
    app: AppSettings | None = None,
    faults: tuple[str, ...] = (),
    tool_ms: float | None = None,
    timeout_s: float = 180.0,
    python: str | None = None,
) -> DriverResult:
    """Serve an emulator, run ``python -m instrumented_stack.realclients <driver>`` against it, return the result.

    ``app`` sets how the chat-loop drivers' app behaves (default :class:`AppSettings`); ``faults`` (names of
    :data:`~instrumented_stack.realclients.faults.CLIENT_FAULTS`) change it and the emulator further;
    ``tool_ms`` is each tool call's work in **ms** (default the driver's). ``python``: the interpreter that runs
    the driver (default this one), e.g. a side virtualenv's for a library that cannot be installed beside the
    project's (``realclients.SIDE_VENV_DRIVERS``); it finds ``instrumented_stack`` through ``PYTHONPATH``
    (``env.module_process_env``).

    Raises:
        DriverFailed: the driver exited non-zero or did not finish within ``timeout_s`` seconds.
        KeyError: an unknown fault name.
    """
    app, config = apply_client_faults(
        app or AppSettings(), emulator_config(engine_spans=engine_spans, speed=speed, throttle=throttle), faults
    )
    with serve_emulator(config, otlp_span_processor(otlp_endpoint)) as llm_url:
        command = [
            python or sys.executable,
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
        if tool_ms is not None:
            command += ["--tool-ms", str(tool_ms)]
        command += app.command_line()
        started = time.monotonic()
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                env=os.environ | module_process_env(),
            )
        except subprocess.TimeoutExpired as error:
            raise DriverFailed(f"{driver} did not finish within {timeout_s} s") from error
        wall_s = time.monotonic() - started
    if done.returncode != 0:
        raise DriverFailed(f"{driver} exited {done.returncode}: {(done.stdout + done.stderr)[-4000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    truth = json.loads(truth_out.read_text(encoding="utf-8"))
    return DriverResult(driver, summary["trace_ids"], truth, truth_out, wall_s)
