"""The ``hotspan stack`` subcommands: ``hotspan stack run`` replays a workload through the stack.

``hotspan/cli.py`` only registers :func:`add_stack_parser` and dispatches to :func:`run_stack_command`, so
the stack's options live here, next to the code they drive.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from instrumented_stack.engine.vllm_backend import ENGINE_CHOICES
from instrumented_stack.env import ENV_STACK_ENGINE, stack_engine_choice
from instrumented_stack.faults import FAULTS, parse_faults
from instrumented_stack.replay import RunSettings, run_workload, write_manifest
from instrumented_stack.stack import StackConfig
from instrumented_stack.sweep import SWEEP_KEYS, SweepRun, parse_sweep, run_sweep, write_sweep_manifest
from instrumented_stack.tools import ToolsConfig
from instrumented_stack.workload import WORKLOADS


def add_stack_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``stack`` (with its ``run`` subcommand) to the ``hotspan`` subcommands."""
    stack = commands.add_parser("stack", help="run the instrumented agent stack (vLLM emulator) against a collector")
    actions = stack.add_subparsers(dest="stack_command", required=True)
    run = actions.add_parser(
        "run",
        help="replay a workload trace through the stack, optionally with faults",
        description=f"Faults: {', '.join(FAULTS)}.",
    )
    run.add_argument("--workload", required=True, choices=WORKLOADS, help="trace to replay")
    run.add_argument("--rate-scale", type=float, default=1.0, help="arrival rate multiplier (default 1.0)")
    run.add_argument("--duration", type=float, default=60.0, help="replay window in seconds (default 60)")
    run.add_argument("--faults", default="", help="comma-separated fault names (default none)")
    run.add_argument("--endpoint", required=True, help="OTLP endpoint, e.g. http://127.0.0.1:4318")
    run.add_argument("--protocol", default="http/protobuf", choices=("http/protobuf", "grpc"))
    run.add_argument("--manifest", type=Path, help="write the run manifest (JSON) here")
    run.add_argument("--closed-loop", type=int, metavar="N", help="N closed-loop users instead of open-loop replay")
    run.add_argument("--seed", type=int, default=0, help="prompt seed (default 0)")
    run.add_argument("--speed", type=float, default=20.0, help="engine speed factor (default 20)")
    run.add_argument("--offset", type=int, default=0, help="first workload row (default 0)")
    run.add_argument("--limit", type=int, help="at most this many rows")
    run.add_argument("--threads", action="store_true", help="run the services as threads of one process")
    run.add_argument(
        "--lookup-latency",
        type=float,
        metavar="SECONDS",
        help="the tools service's catalogue lookup latency in seconds (default 0.002; hotspan demo's is 0.1)",
    )
    run.add_argument(
        "--engine",
        choices=ENGINE_CHOICES,
        help=f"LLM engine: auto (vLLM when installed and a CUDA GPU is visible, else the emulator), emulator, "
        f"or vllm (default: ${ENV_STACK_ENGINE}, else auto)",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress line")
    run.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help=f"replay once per value, each on a fresh stack; repeated: all combinations. Keys: {', '.join(SWEEP_KEYS)}",
    )


def run_stack_command(args: argparse.Namespace) -> int:
    """Run ``hotspan stack <command>``; returns the exit status (2 for bad arguments)."""
    try:
        settings = RunSettings(
            workload=args.workload,
            rate_scale=args.rate_scale,
            duration_s=args.duration,
            faults=parse_faults(args.faults),
            closed_loop_users=args.closed_loop,
            seed=args.seed,
            speed=args.speed,
            offset=args.offset,
            limit=args.limit,
            mode="threads" if args.threads else "processes",
            engine=stack_engine_choice(args.engine),
        )
        progress = None if args.no_progress else sys.stderr
        axes = parse_sweep(args.sweep)
        config = _config(args)
        if axes:
            runs = run_sweep(
                settings, axes, endpoint=args.endpoint, protocol=args.protocol, config=config, progress=progress
            )
        else:
            run = run_workload(
                settings, endpoint=args.endpoint, protocol=args.protocol, config=config, progress=progress
            )
            runs = [SweepRun({}, run)]
    except ValueError as error:
        print(f"hotspan stack run: {error}", file=sys.stderr)
        return 2
    faults = ", ".join(settings.faults) or "none"
    for swept in runs:
        run = swept.run
        what = f"{settings.workload}, engine: {run.config.engine_backend}, faults: {faults}"
        what += "".join(f", {key}={value}" for key, value in swept.point.items())
        print(f"Stack run ({what}): {run.summary}")
    if args.manifest:
        if axes:
            write_sweep_manifest(args.manifest, runs, endpoint=args.endpoint)
        else:
            write_manifest(args.manifest, runs[0].run, endpoint=args.endpoint)
        print(f"Manifest: {args.manifest}")
    return 0


def _config(args: argparse.Namespace) -> StackConfig:
    """The stack's default configuration with the options that change it (``--lookup-latency``).

    Raises:
        ValueError: a negative lookup latency (pydantic's ``ValidationError``).
    """
    config = StackConfig()
    if args.lookup_latency is None:
        return config
    tools = ToolsConfig.model_validate({**config.tools.model_dump(), "lookup_latency_s": args.lookup_latency})
    return config.model_copy(update={"tools": tools})
