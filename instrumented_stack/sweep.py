"""Configuration sweeps: the same workload replayed through the stack once per engine configuration or load
level, in sequence, so a throughput-latency view sees every point of the sweep.

``hotspan stack run --sweep max_num_seqs=8,32,128 --sweep rate_scale=1,4`` parses each ``--sweep`` into a
:class:`SweepAxis` (:func:`parse_sweep`) and runs every combination of their values (:func:`sweep_points`, the
first axis varying slowest), each on a fresh stack (:func:`run_sweep`): a new engine with an empty KV cache,
whose spans carry its configuration as ``vllm.config.*`` resource attributes (``engine.config_resource``).

Keys (:data:`SWEEP_KEYS`): the engine scheduler's ``max_num_seqs``, ``max_num_batched_tokens``,
``enable_prefix_caching`` and ``enable_chunked_prefill`` (the ``vllm serve`` flags of the same names; without
chunked prefill ``max_num_batched_tokens`` must reach the engine's ``max_model_len``, as vLLM requires), and the
load: ``rate_scale`` (open loop)
or ``closed_loop`` (that many closed-loop users). Faults given with the sweep apply on top of each point.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from instrumented_stack.engine.app import EngineConfig
from instrumented_stack.engine.scheduler import SchedulerConfig
from instrumented_stack.replay import RunSettings, WorkloadRun, manifest, run_workload
from instrumented_stack.stack import StackConfig
from instrumented_stack.telemetry import OtlpProtocol, SpanProcessorFactory

SweepValue = int | float | bool


def _flag(text: str) -> bool:
    if text.lower() in ("true", "on", "1"):
        return True
    if text.lower() in ("false", "off", "0"):
        return False
    raise ValueError(f"{text!r} is not true/false")


SCHEDULER_KEYS = ("max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching", "enable_chunked_prefill")
"""Sweep keys that are fields of :class:`~instrumented_stack.engine.scheduler.SchedulerConfig`."""
SWEEP_KEYS: dict[str, Callable[[str], SweepValue]] = {
    "max_num_seqs": int,
    "max_num_batched_tokens": int,
    "enable_prefix_caching": _flag,
    "enable_chunked_prefill": _flag,
    "rate_scale": float,
    "closed_loop": int,
}
"""Every sweep key and how its values are read."""


@dataclass(frozen=True, slots=True)
class SweepAxis:
    """One ``--sweep KEY=V1,V2,...``: a key of :data:`SWEEP_KEYS` and its values, in the order given."""

    key: str
    values: tuple[SweepValue, ...]


def parse_sweep(texts: Sequence[str]) -> tuple[SweepAxis, ...]:
    """The axes of ``--sweep`` arguments (``KEY=V1,V2,...`` each).

    Raises:
        ValueError: a malformed argument, an unknown or repeated key, no value, or a value of the wrong type;
            the message names the argument.
    """
    axes: list[SweepAxis] = []
    for text in texts:
        key, sep, values = text.partition("=")
        key = key.strip()
        if not sep or key not in SWEEP_KEYS:
            raise ValueError(f"--sweep {text!r}: expected KEY=V1,V2,... with KEY one of {', '.join(SWEEP_KEYS)}")
        if any(axis.key == key for axis in axes):
            raise ValueError(f"--sweep {text!r}: {key} is swept twice")
        parts = [part.strip() for part in values.split(",") if part.strip()]
        if not parts:
            raise ValueError(f"--sweep {text!r}: no values")
        try:
            axes.append(SweepAxis(key, tuple(SWEEP_KEYS[key](part) for part in parts)))
        except ValueError as error:
            raise ValueError(f"--sweep {text!r}: {error}") from None
    return tuple(axes)


def sweep_points(axes: Sequence[SweepAxis]) -> list[dict[str, SweepValue]]:
    """Every combination of the axes' values (``key -> value``), the first axis varying slowest; one empty
    point for no axes."""
    return [
        dict(zip((axis.key for axis in axes), combo, strict=True))
        for combo in itertools.product(*(a.values for a in axes))
    ]


def apply_point(
    settings: RunSettings, config: StackConfig, point: dict[str, SweepValue]
) -> tuple[RunSettings, StackConfig]:
    """``settings`` and ``config`` with one sweep point's values set.

    Raises:
        ValueError: a value the scheduler or the run refuses (e.g. ``max_num_seqs=0``), or a KV cache too small
            for ``max_model_len`` (pydantic's ``ValidationError`` is a ``ValueError``).
    """
    scheduler = {key: value for key, value in point.items() if key in SCHEDULER_KEYS}
    if scheduler:
        swept = SchedulerConfig.model_validate(config.engine.scheduler.model_dump() | scheduler)
        engine = EngineConfig.model_validate(config.engine.model_dump() | {"scheduler": swept.model_dump()})
        config = config.model_copy(update={"engine": engine})
    if "rate_scale" in point:
        settings = replace(settings, rate_scale=float(point["rate_scale"]))
    if "closed_loop" in point:
        settings = replace(settings, closed_loop_users=int(point["closed_loop"]))
    return settings, config


@dataclass(frozen=True, slots=True)
class SweepRun:
    """One point of a sweep and its run."""

    point: dict[str, SweepValue]
    run: WorkloadRun


def run_sweep(
    settings: RunSettings,
    axes: Sequence[SweepAxis],
    *,
    endpoint: str | None = None,
    protocol: OtlpProtocol = "http/protobuf",
    config: StackConfig | None = None,
    span_processors: SpanProcessorFactory | None = None,
    progress: TextIO | None = sys.stderr,
) -> list[SweepRun]:
    """Replay ``settings`` once per :func:`sweep_points` of ``axes``, in order, each on a fresh stack
    (:func:`instrumented_stack.replay.run_workload`, same arguments). Blocking: the sweep takes about
    ``settings.duration_s`` per point plus each stack's start.

    Raises:
        ValueError: a point :func:`apply_point` refuses (checked for every point before the first run), or
            what :func:`~instrumented_stack.replay.run_workload` raises.
    """
    base = config or StackConfig()
    points = sweep_points(axes)
    planned = [(point, *apply_point(settings, base, point)) for point in points]
    runs = []
    for point, point_settings, point_config in planned:
        if progress is not None:
            progress.write(f"sweep point {', '.join(f'{k}={v}' for k, v in point.items()) or '(none)'}\n")
        run = run_workload(
            point_settings,
            endpoint=endpoint,
            protocol=protocol,
            config=point_config,
            span_processors=span_processors,
            progress=progress,
        )
        runs.append(SweepRun(point, run))
    return runs


def write_sweep_manifest(path: Path, runs: Sequence[SweepRun], *, endpoint: str | None) -> None:
    """Write a sweep's manifest to ``path`` (parents created), indented JSON: ``kind``
    ``hotspan.instrumented_stack.sweep`` and ``runs``, each point's values (``sweep``) beside its run manifest
    (:func:`instrumented_stack.replay.manifest`), in run order."""
    body = {
        "kind": "hotspan.instrumented_stack.sweep",
        "runs": [{"sweep": swept.point, **manifest(swept.run, endpoint=endpoint)} for swept in runs],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
