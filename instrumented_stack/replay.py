"""``hotspan stack run``: replay a workload through the stack, with faults, and write a run manifest.

:func:`run_workload` starts the stack (separate processes by default, or threads), replays the workload
open-loop (arrival times divided by ``rate_scale``) or closed-loop (``closed_loop_users`` users), prints
progress, scrapes the engine's TTFT histogram and returns a :class:`WorkloadRun`. :func:`write_manifest`
records what was run - the seed, workload, faults, time window (Unix **nanoseconds**), settings and
summary - as JSON. The fault list goes only there: services see ordinary settings (``faults.py``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO

from instrumented_stack.engine.vllm_backend import resolve_engine
from instrumented_stack.faults import apply_faults
from instrumented_stack.loadgen import UserSettings, replay_closed_loop, replay_open_loop, replay_prompts
from instrumented_stack.prompts import PromptBuilder
from instrumented_stack.runner import scrape_ttft, with_speed
from instrumented_stack.stack import Stack, StackConfig
from instrumented_stack.summary import RunSummary, summarise
from instrumented_stack.supervisor import ProcessStack
from instrumented_stack.telemetry import (
    OtlpProtocol,
    SpanProcessorFactory,
    check_otlp_endpoint,
    otlp_span_processors,
)
from instrumented_stack.tokenizer import default_tokenizer
from instrumented_stack.workload import load_workload

Mode = Literal["processes", "threads"]


@dataclass(frozen=True, slots=True)
class RunSettings:
    """What to replay and how.

    Attributes:
        workload: ``azure-conv``, ``azure-code`` or ``mooncake``.
        rate_scale: arrival rate multiplier (open loop): offsets are divided by it (> 0).
        duration_s: replay window in wall-clock **seconds**: open loop sends rows due within it, closed
            loop starts no request after it.
        faults: fault names (``faults.FAULTS``).
        closed_loop_users: ``None`` for open loop, else the number of closed-loop users.
        seed: seeds the prompts.
        speed: engine speed factor (modeled seconds / speed).
        offset: first workload row.
        limit: at most this many rows (``None``: as many as the window takes).
        mode: ``processes`` (one per service) or ``threads`` (one process).
        tenants: tenants round-robin (``None``: every configured one).
        engine: ``emulator``, ``vllm`` or ``auto`` (``engine.vllm_backend.resolve_engine``); ``vllm`` needs
            ``processes`` mode.
    """

    workload: str
    rate_scale: float = 1.0
    duration_s: float = 60.0
    faults: tuple[str, ...] = ()
    closed_loop_users: int | None = None
    seed: int = 0
    speed: float = 20.0
    offset: int = 0
    limit: int | None = None
    mode: Mode = "processes"
    tenants: tuple[str, ...] | None = None
    engine: str = "emulator"


@dataclass(frozen=True, slots=True)
class WorkloadRun:
    """A finished run: its settings, stack configuration, summary and window (Unix **nanoseconds**)."""

    settings: RunSettings
    config: StackConfig
    summary: RunSummary
    start_unix_ns: int
    end_unix_ns: int
    urls: dict[str, str] = field(default_factory=dict)


def _progress_printer(stream: TextIO) -> Callable[[int, int, int], None]:
    last = [0.0]

    def show(answered: int, errors: int, total: int) -> None:
        now = time.monotonic()
        if answered == total or now - last[0] >= 1.0:
            last[0] = now
            stream.write(f"\r  {answered}/{total} answered, {errors} errors")
            if answered == total:
                stream.write("\n")
            stream.flush()

    return show


def run_workload(
    settings: RunSettings,
    *,
    endpoint: str | None = None,
    protocol: OtlpProtocol = "http/protobuf",
    config: StackConfig | None = None,
    span_processors: SpanProcessorFactory | None = None,
    progress: TextIO | None = sys.stderr,
) -> WorkloadRun:
    """Replay ``settings.workload`` through a fresh stack and return the run.

    Args:
        settings: what to replay.
        endpoint: OTLP collector the services export to (required in ``processes`` mode).
        protocol: OTLP transport.
        config: the clean stack configuration (faults are applied to it); default :class:`StackConfig`.
        span_processors: ``threads`` mode only: per-service span processors instead of OTLP.
        progress: where progress lines go; ``None``: silent.

    Raises:
        ValueError: bad settings, unknown workload, fault or engine, no way to export spans, an endpoint
            that does not accept an (empty) export, ``vllm`` in ``threads`` mode.
        VllmUnavailableError: (a ``ValueError``) ``vllm`` asked for where vLLM or a GPU is missing.
        FileNotFoundError: the workload file is missing.
        RuntimeError: a service did not start.
    """
    if settings.closed_loop_users is not None and settings.closed_loop_users < 1:
        raise ValueError(f"closed_loop_users must be >= 1, got {settings.closed_loop_users}")
    if settings.duration_s <= 0:
        raise ValueError(f"duration_s must be > 0, got {settings.duration_s}")
    if endpoint is None and (settings.mode == "processes" or span_processors is None):
        raise ValueError("give an OTLP endpoint (or span_processors in threads mode)")
    # In one process only the emulator can run, so there `auto` means the emulator.
    asked = "emulator" if settings.mode == "threads" and settings.engine == "auto" else settings.engine
    backend = resolve_engine(asked)
    if backend == "vllm" and settings.mode != "processes":
        raise ValueError("the vllm engine runs as its own process: use processes mode (no --threads)")
    if endpoint is not None:
        check_otlp_endpoint(endpoint, protocol=protocol)
    stack_config = with_speed(apply_faults(config or StackConfig(), settings.faults), settings.speed)
    stack_config = stack_config.model_copy(update={"engine_backend": backend})
    rows = load_workload(settings.workload, limit=settings.limit, offset=settings.offset)
    if settings.closed_loop_users is None and rows:
        origin = rows[0].arrival_offset_s
        rows = [row for row in rows if (row.arrival_offset_s - origin) / settings.rate_scale <= settings.duration_s]
    user_settings = UserSettings(
        tenants=stack_config.credentials(settings.tenants),
        progress=_progress_printer(progress) if progress is not None else None,
    )
    prompts = replay_prompts(PromptBuilder(default_tokenizer(), settings.seed), rows, user_settings)
    stack: Stack | ProcessStack
    if settings.mode == "processes":
        stack = ProcessStack(stack_config, str(endpoint), protocol=protocol)
    else:
        stack = Stack(stack_config, span_processors or otlp_span_processors(str(endpoint), protocol=protocol))
    with stack:
        urls = dict(stack.urls.services)
        start_ns = time.time_ns()
        started = time.monotonic()
        if settings.closed_loop_users is None:
            replay = replay_open_loop(
                stack.gateway_url,
                prompts,
                user_settings,
                rate_scale=settings.rate_scale,
                duration_s=settings.duration_s,
            )
        else:
            replay = replay_closed_loop(
                stack.gateway_url,
                prompts,
                user_settings,
                users=settings.closed_loop_users,
                duration_s=settings.duration_s,
            )
        outcomes = asyncio.run(replay)
        duration_s = time.monotonic() - started
        end_ns = time.time_ns()
        ttft = scrape_ttft(stack.urls.engine)
    return WorkloadRun(settings, stack_config, summarise(outcomes, duration_s, ttft), start_ns, end_ns, urls)


def manifest(run: WorkloadRun, *, endpoint: str | None) -> dict[str, object]:
    """The run manifest as a JSON-ready dict (see the module docstring)."""
    s = run.settings
    return {
        "kind": "hotspan.instrumented_stack.run",
        "seed": s.seed,
        "workload": s.workload,
        "faults": list(s.faults),
        "window": {"start_unix_ns": run.start_unix_ns, "end_unix_ns": run.end_unix_ns},
        "loop": {"mode": "closed", "users": s.closed_loop_users} if s.closed_loop_users else {"mode": "open"},
        "rate_scale": s.rate_scale,
        "duration_s": s.duration_s,
        "speed": s.speed,
        "offset": s.offset,
        "limit": s.limit,
        "process_mode": s.mode,
        "engine": run.config.engine_backend,
        "endpoint": endpoint,
        "services": run.urls,
        "summary": run.summary.to_json(),
        "trace_ids": [o.trace_id for o in run.summary.outcomes if o.trace_id],
        "stack_config": json.loads(run.config.model_dump_json()),
    }


def write_manifest(path: Path, run: WorkloadRun, *, endpoint: str | None) -> None:
    """Write :func:`manifest` to ``path`` (parents created), indented JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest(run, endpoint=endpoint), indent=2) + "\n", encoding="utf-8")
