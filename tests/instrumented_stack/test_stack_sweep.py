"""The configuration sweep (``instrumented_stack.sweep``): its argument parsing and points, and a short real sweep
of the stack (threads mode, emulator) exporting to a served Hotspan, whose throughput-latency route then shows one
point per configuration, with the throughput the configuration allowed: one running request at a time against 16.

The throughput comparison is a timing, so the file runs ``alone`` (tests/conftest.py), and the engine runs at a
fifth of real time's speed (``speed=2``) so that its modeled work, not the host's CPU, sets the pace: 3.0 against
10.7 requests/s on an idle 2-core host, 2.9 against 11.0 beside three busy loops (a whole-process stall of ~3 s in
the 16-slot run, with the file among the two-at-a-time tests at ``speed=10``, once made them 8.5 against 7.9)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from instrumented_stack.replay import RunSettings
from instrumented_stack.stack import StackConfig
from instrumented_stack.sweep import SweepAxis, apply_point, parse_sweep, run_sweep, sweep_points, write_sweep_manifest
from testkit import serve_in_process


def test_parse_sweep_reads_keys_and_typed_values() -> None:
    axes = parse_sweep(["max_num_seqs=8, 32,128", "enable_prefix_caching=on,off", "rate_scale=0.5"])
    assert axes == (
        SweepAxis("max_num_seqs", (8, 32, 128)),
        SweepAxis("enable_prefix_caching", (True, False)),
        SweepAxis("rate_scale", (0.5,)),
    )
    for bad, message in [
        ("max_num_seqs", "expected KEY=V1"),
        ("block_size=16", "expected KEY=V1"),
        ("max_num_seqs=", "no values"),
        ("max_num_seqs=eight", "invalid literal"),
        ("enable_prefix_caching=maybe", "not true/false"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_sweep([bad])
    with pytest.raises(ValueError, match="swept twice"):
        parse_sweep(["closed_loop=1", "closed_loop=2"])


def test_points_are_every_combination_first_axis_slowest_and_apply_to_the_run() -> None:
    points = sweep_points(parse_sweep(["max_num_seqs=8,32", "closed_loop=2,4"]))
    assert points == [
        {"max_num_seqs": 8, "closed_loop": 2},
        {"max_num_seqs": 8, "closed_loop": 4},
        {"max_num_seqs": 32, "closed_loop": 2},
        {"max_num_seqs": 32, "closed_loop": 4},
    ]
    assert sweep_points(()) == [{}]
    settings, config = apply_point(RunSettings("azure-conv"), StackConfig(), {"max_num_seqs": 8, "closed_loop": 4})
    assert config.engine.scheduler.max_num_seqs == 8 and settings.closed_loop_users == 4
    with pytest.raises(ValueError, match="max_num_seqs"):
        apply_point(RunSettings("azure-conv"), StackConfig(), {"max_num_seqs": 0})
    # As vLLM: without chunked prefill the step budget must hold the longest prompt.
    with pytest.raises(ValueError, match="without chunked prefill"):
        apply_point(RunSettings("azure-conv"), StackConfig(), {"enable_chunked_prefill": False})
    off = {"enable_chunked_prefill": False, "max_num_batched_tokens": StackConfig().engine.max_model_len}
    assert not apply_point(RunSettings("azure-conv"), StackConfig(), off)[1].engine.scheduler.enable_chunked_prefill


def test_a_short_sweep_fills_the_throughput_latency_view(chdb_dsn: str, tmp_path: Path) -> None:
    server = serve_in_process(chdb_dsn, tmp_path / "hotspan", "sweep", grpc_port=-1)
    try:
        settings = RunSettings("azure-conv", duration_s=1.5, closed_loop_users=8, speed=2.0, limit=120, mode="threads")
        started = time.time_ns()
        runs = run_sweep(settings, parse_sweep(["max_num_seqs=1,16"]), endpoint=server.base_url, progress=None)
        assert [run.point for run in runs] == [{"max_num_seqs": 1}, {"max_num_seqs": 16}]
        assert all(run.run.summary.errors == 0 and run.run.summary.requests > 0 for run in runs)
        manifest = tmp_path / "sweep.json"
        write_sweep_manifest(manifest, runs, endpoint=server.base_url)
        assert [run["sweep"] for run in json.loads(manifest.read_text())["runs"]] == [runs[0].point, runs[1].point]

        assert server.pipeline is not None and server.pipeline.flush()
        params = {"start_ns": started, "end_ns": time.time_ns(), "bucket_s": 3600}
        body = httpx.get(f"{server.base_url}/api/v1/throughput-latency", params=params, timeout=30).json()
    finally:
        server.stop()
    points = {p["config"]["max_num_seqs"]: p for p in body["points"]}
    assert set(points) == {"1", "16"}, body
    one, sixteen = points["1"], points["16"]
    assert one["model"] == sixteen["model"] == StackConfig().engine.served_model_name
    assert one["config"]["enable_prefix_caching"] == "true"
    # One request at a time queues the 8 users behind each other: less throughput, more latency.
    assert sixteen["requests_per_s"] > 1.5 * one["requests_per_s"], points
    assert one["ttft_p95_ms"] > sixteen["ttft_p95_ms"], points
    assert sixteen["on_frontier"]
