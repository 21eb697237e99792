"""A small vLLM emulator for the client tests (``test_stack_engine_*``): one model, answers that end after
:data:`ANSWER_TOKENS` tokens, spans into the test's in-memory capture (service ``vllm``), served on loopback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from instrumented_stack.capture import InMemorySpans
from instrumented_stack.engine import EngineConfig, SchedulerConfig, create_engine_app

MODEL = "test-model"
ANSWER_TOKENS = 12
Serve = Callable[[FastAPI], str]


def serve_emulator_app(in_memory_spans: InMemorySpans, serve: Serve, **config: Any) -> str:
    """The root URL of a fresh emulator (``max_model_len`` 4,096, 512 KV blocks and :data:`ANSWER_TOKENS` unless
    ``config`` says otherwise; other ``config`` fields are :class:`EngineConfig`'s)."""
    config.setdefault("scheduler", SchedulerConfig(num_gpu_blocks=512))
    config.setdefault("answer_tokens", ANSWER_TOKENS)
    engine = EngineConfig(served_model_name=MODEL, max_model_len=4096, **config)
    return serve(create_engine_app(engine, in_memory_spans("vllm")))
