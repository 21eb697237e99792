"""Run the instrumented stack once: start it, replay workload rows through it, flush, summarise.

``run_stack`` is what ``hotspan demo`` calls, e.g.::

    summary = run_stack(endpoint="http://127.0.0.1:4318", requests=50, concurrency=4)
    print(summary)  # 50 requests, 0 errors, e2e p50 ... ms, p95 ... ms in ... s
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from instrumented_stack.engine import SimpleTimeModel
from instrumented_stack.loadgen import RequestOutcome, replay
from instrumented_stack.stack import Stack, StackConfig
from instrumented_stack.telemetry import OtlpProtocol, SpanProcessorFactory, otlp_span_processors
from instrumented_stack.workload import load_azure_trace


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What one run did.

    Attributes:
        requests: user requests sent.
        errors: requests that did not get a 200.
        p50_e2e_ms, p95_e2e_ms: client-side end-to-end latency percentiles of the successful requests,
            in **milliseconds**; ``None`` when none succeeded.
        duration_s: wall-clock **seconds** from the first request to the last answer.
        outcomes: every request, in workload order (trace ids included).
    """

    requests: int
    errors: int
    p50_e2e_ms: float | None
    p95_e2e_ms: float | None
    duration_s: float
    outcomes: tuple[RequestOutcome, ...]

    def __str__(self) -> str:
        """One line, e.g. ``20 requests, 0 errors, e2e p50 212.4 ms, p95 388.0 ms in 4.3 s``."""
        if self.p50_e2e_ms is None or self.p95_e2e_ms is None:
            latency = "no successful request"
        else:
            latency = f"e2e p50 {self.p50_e2e_ms:.1f} ms, p95 {self.p95_e2e_ms:.1f} ms"
        return f"{self.requests} requests, {self.errors} errors, {latency} in {self.duration_s:.1f} s"


def summarise(outcomes: Sequence[RequestOutcome], duration_s: float) -> RunSummary:
    """A :class:`RunSummary` of ``outcomes`` (percentiles by linear interpolation)."""
    latencies = np.array([outcome.latency_ms for outcome in outcomes if outcome.ok], dtype=float)
    p50, p95 = (float(v) for v in np.percentile(latencies, [50, 95])) if latencies.size else (None, None)
    return RunSummary(
        requests=len(outcomes),
        errors=sum(not outcome.ok for outcome in outcomes),
        p50_e2e_ms=p50,
        p95_e2e_ms=p95,
        duration_s=duration_s,
        outcomes=tuple(outcomes),
    )


def run_stack(
    endpoint: str | None = "http://127.0.0.1:4318",
    *,
    requests: int = 20,
    concurrency: int = 1,
    protocol: OtlpProtocol = "http/protobuf",
    speed: float = 20.0,
    offset: int = 0,
    tenants: Sequence[str] = ("tenant-a", "tenant-b"),
    sample_policy: str | None = None,
    workload_path: Path | None = None,
    config: StackConfig | None = None,
    span_processors: SpanProcessorFactory | None = None,
) -> RunSummary:
    """Start gateway, agent and vLLM emulator on free loopback ports, replay workload rows, stop.

    Blocks until every span is exported (or the exporter gave up); call it from a thread without a
    running asyncio event loop.

    Args:
        endpoint: OTLP collector each service exports to, e.g. a running Hotspan at
            ``http://127.0.0.1:4318`` (``http/protobuf``: ``/v1/traces`` is appended) or
            ``http://127.0.0.1:4317`` (``grpc``). Ignored when ``span_processors`` is given.
        requests: rows of the Azure conversation trace to replay (>= 1).
        concurrency: users sending at once (closed loop, >= 1).
        protocol: ``http/protobuf`` or ``grpc``.
        speed: engine speed-up (modeled seconds / speed); overrides ``config``'s time model speed.
        offset: first workload row to replay.
        tenants: ``x-tenant-id`` values, round-robin.
        sample_policy: ``x-sample-policy`` for every request (``None``: not sent).
        workload_path: the workload CSV; default the shared Azure conversation trace.
        config: stack settings (ports, model, time model); default :class:`StackConfig`.
        span_processors: per-service span processors (given the ``service.name``), e.g. in-memory
            exporters in tests; default OTLP to ``endpoint``.

    Returns:
        The run's :class:`RunSummary`.

    Raises:
        ValueError: no ``endpoint`` and no ``span_processors``; ``requests`` or ``concurrency`` < 1;
            an invalid ``speed`` or ``config``.
        FileNotFoundError: the workload file or shared data directory is missing.
        RuntimeError: a service did not start.
    """
    if requests < 1 or concurrency < 1:
        raise ValueError(f"requests and concurrency must be >= 1, got {requests} and {concurrency}")
    if span_processors is None and endpoint is None:
        raise ValueError("give an OTLP endpoint or span_processors")
    processors = span_processors or otlp_span_processors(str(endpoint), protocol=protocol)
    base = config or StackConfig()
    time_model = SimpleTimeModel.model_validate({**base.engine.time_model.model_dump(), "speed": speed})
    stack_config = base.model_copy(update={"engine": base.engine.model_copy(update={"time_model": time_model})})
    rows = load_azure_trace(workload_path, limit=requests, offset=offset)
    with Stack(stack_config, processors) as stack:
        started = time.monotonic()
        outcomes = asyncio.run(
            replay(stack.gateway_url, rows, concurrency=concurrency, tenants=tenants, sample_policy=sample_policy)
        )
        duration_s = time.monotonic() - started
    return summarise(outcomes, duration_s)
