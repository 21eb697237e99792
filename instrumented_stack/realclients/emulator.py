"""The vLLM emulator as the drivers' LLM server: settings that keep a driver run to a few seconds.

``answer_tokens`` makes answers end (real clients send no ``max_tokens``); speed 1 keeps the engine's own
time model (an LLM call of a few hundred tokens of prompt and 24 of answer takes ~0.2 s), so LLM time is a
large, realistic share of each request. Spans go to ``span_processor`` only when ``engine_spans``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.sdk.trace import SpanProcessor

from instrumented_stack.engine import EngineConfig, SchedulerConfig, StepTimeModel, create_engine_app
from instrumented_stack.engine.throttle import ThrottleConfig
from instrumented_stack.serving import ThreadedServer, bind_loopback

ANSWER_TOKENS = 24
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def emulator_config(*, engine_spans: bool, speed: float = 1.0, throttle: ThrottleConfig | None = None) -> EngineConfig:
    """The emulator's settings for driver runs (``speed``: the time model's speed-up)."""
    return EngineConfig(
        served_model_name=MODEL,
        max_model_len=16384,
        scheduler=SchedulerConfig(num_gpu_blocks=4096),
        time_model=StepTimeModel(speed=speed),
        answer_tokens=ANSWER_TOKENS,
        trace_requests=engine_spans,
        throttle=throttle or ThrottleConfig(),
    )


@contextmanager
def serve_emulator(config: EngineConfig, span_processor: SpanProcessor) -> Iterator[str]:
    """Serve the emulator on a free loopback port in a thread; yields its root URL. Stopping flushes its spans."""
    server = ThreadedServer(create_engine_app(config, span_processor), bind_loopback(), name="realclients-emulator")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()
