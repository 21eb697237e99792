"""Run the instrumented stack once in this process: start it, replay Azure rows closed-loop, flush, summarise.

``run_stack`` is what ``hotspan demo`` calls, e.g.::

    summary = run_stack(endpoint="http://127.0.0.1:4318", requests=50, concurrency=4)
    print(summary)  # 50 requests, 0 errors, ... QPS, e2e p50 ... ms, p95 ... ms, p99 ... ms ...

``hotspan stack run`` (open loop, every workload, faults, separate processes) is ``replay.run_workload``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypedDict, Unpack

import httpx

from instrumented_stack.engine import StepTimeModel
from instrumented_stack.loadgen import UserSettings, replay_closed_loop, replay_prompts
from instrumented_stack.planning import Intent
from instrumented_stack.prompts import DEFAULT_INTENT_MIX, PromptBuilder
from instrumented_stack.stack import Stack, StackConfig, StackUrls
from instrumented_stack.summary import TTFT_METRIC, HistogramSnapshot, RunSummary, parse_histogram, summarise
from instrumented_stack.telemetry import OtlpProtocol, SpanProcessorFactory, otlp_span_processors
from instrumented_stack.tokenizer import default_tokenizer
from instrumented_stack.workload import load_azure_trace


def with_speed(config: StackConfig, speed: float) -> StackConfig:
    """``config`` with the engine's speed factor set. Raises ``ValueError`` for ``speed <= 0``."""
    time_model = StepTimeModel.model_validate({**config.engine.time_model.model_dump(), "speed": speed})
    return config.model_copy(update={"engine": config.engine.model_copy(update={"time_model": time_model})})


def scrape_ttft(engine_url: str, *, verify: bool = False) -> HistogramSnapshot | None:
    """The engine's TTFT histogram from ``{engine_url}/metrics``; ``None`` when it cannot be read.

    ``verify`` is off by default because an HTTPS engine presents a self-signed certificate.
    """
    try:
        response = httpx.get(f"{engine_url}/metrics", timeout=10.0, verify=verify)
    except httpx.HTTPError:
        return None
    return parse_histogram(response.text, TTFT_METRIC) if response.status_code == 200 else None


class RunningStack:
    """A started :class:`Stack` that replays Azure rows closed-loop on demand (:func:`running_stack`).

    ``replay`` blocks until the requests are answered; call it from a thread without a running asyncio event loop,
    one call at a time.
    """

    def __init__(self, stack: Stack, settings: UserSettings, builder: PromptBuilder, workload: Path | None) -> None:
        self._stack = stack
        self._settings = settings
        self._builder = builder
        self._workload = workload

    @property
    def urls(self) -> StackUrls:
        """Root URLs of the stack's services (its engine's ``/metrics`` is what a Prometheus scrapes)."""
        return self._stack.urls

    def replay(self, requests: int, *, offset: int = 0, concurrency: int = 1) -> RunSummary:
        """Replay ``requests`` (>= 1) workload rows from row ``offset`` with ``concurrency`` users (>= 1).

        Raises:
            ValueError: ``requests`` or ``concurrency`` < 1.
        """
        if requests < 1 or concurrency < 1:
            raise ValueError(f"requests and concurrency must be >= 1, got {requests} and {concurrency}")
        rows = load_azure_trace(self._workload, limit=requests, offset=offset)
        prompts = replay_prompts(self._builder, rows, self._settings)
        started = time.monotonic()
        outcomes = asyncio.run(replay_closed_loop(self._stack.gateway_url, prompts, self._settings, users=concurrency))
        duration_s = time.monotonic() - started
        return summarise(outcomes, duration_s, scrape_ttft(self._stack.urls.engine))


class StackOptions(TypedDict, total=False):
    """How :func:`running_stack` starts the stack; each key is one of its keyword arguments, with its default."""

    protocol: OtlpProtocol
    speed: float
    tenants: Sequence[str]
    sample_policy: str | None
    workload_path: Path | None
    config: StackConfig | None
    span_processors: SpanProcessorFactory | None
    seed: int
    intent_mix: Mapping[Intent, float]


@contextmanager
def running_stack(
    endpoint: str | None = "http://127.0.0.1:4318",
    *,
    protocol: OtlpProtocol = "http/protobuf",
    speed: float = 20.0,
    tenants: Sequence[str] = ("tenant-a", "tenant-b"),
    sample_policy: str | None = None,
    workload_path: Path | None = None,
    config: StackConfig | None = None,
    span_processors: SpanProcessorFactory | None = None,
    seed: int = 0,
    intent_mix: Mapping[Intent, float] = DEFAULT_INTENT_MIX,
) -> Iterator[RunningStack]:
    """The stack started on free loopback ports in this process until the block ends (what :func:`run_stack`
    replays once; ``hotspan demo`` keeps one open while it serves, so a Prometheus can go on scraping its engine).

    Args:
        endpoint: OTLP collector each service exports to, e.g. a running Hotspan at
            ``http://127.0.0.1:4318`` (``http/protobuf``: ``/v1/traces`` is appended) or
            ``http://127.0.0.1:4317`` (``grpc``). Ignored when ``span_processors`` is given.
        protocol: ``http/protobuf`` or ``grpc``.
        speed: engine speed-up (modeled seconds / speed); overrides ``config``'s.
        tenants: tenants sent round-robin (their API keys come from ``config``).
        sample_policy: ``x-sample-policy`` for every request (``None``: not sent).
        workload_path: the workload CSV; default the shared Azure conversation trace.
        config: stack settings; default :class:`StackConfig`.
        span_processors: per-service span processors (given the ``service.name``), e.g. in-memory
            exporters in tests; default OTLP to ``endpoint``.
        seed: seeds the prompts (intents, questions, filler text).
        intent_mix: share of each intent among the rows.

    Raises:
        ValueError: no ``endpoint`` and no ``span_processors``; an invalid ``speed`` or ``config``; a tenant without
            an API key.
        FileNotFoundError: the workload file or shared data directory is missing (on :meth:`RunningStack.replay`).
        RuntimeError: a service did not start.
    """
    if span_processors is None and endpoint is None:
        raise ValueError("give an OTLP endpoint or span_processors")
    processors = span_processors or otlp_span_processors(str(endpoint), protocol=protocol)
    stack_config = with_speed(config or StackConfig(), speed)
    settings = UserSettings(tenants=stack_config.credentials(tuple(tenants)), sample_policy=sample_policy)
    builder = PromptBuilder(default_tokenizer(), seed, intent_mix)
    with Stack(stack_config, processors) as stack:
        yield RunningStack(stack, settings, builder, workload_path)


def run_stack(
    endpoint: str | None = "http://127.0.0.1:4318",
    *,
    requests: int = 20,
    concurrency: int = 1,
    offset: int = 0,
    **options: Unpack[StackOptions],
) -> RunSummary:
    """Start the stack on free loopback ports in this process (:func:`running_stack` with ``endpoint`` and
    ``options``), replay ``requests`` Azure rows (>= 1) from row ``offset`` closed-loop with ``concurrency`` users
    (>= 1), stop.

    Blocks until every span is exported (or the exporter gave up); call it from a thread without a
    running asyncio event loop.

    Raises:
        ValueError: ``requests`` or ``concurrency`` < 1, and as :func:`running_stack`.
        FileNotFoundError, RuntimeError: as :func:`running_stack`.
    """
    if requests < 1 or concurrency < 1:
        raise ValueError(f"requests and concurrency must be >= 1, got {requests} and {concurrency}")
    with running_stack(endpoint, **options) as stack:
        return stack.replay(requests, offset=offset, concurrency=concurrency)
