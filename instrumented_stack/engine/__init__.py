"""A small vLLM emulator: OpenAI-compatible HTTP front end, pluggable engine core, vLLM's own span.

- ``app``: ``create_engine_app(EngineConfig, SpanProcessor)``, the routes and request validation.
- ``core``: the ``EngineCore`` interface and the per-request timeline it reports.
- ``simple_core``: today's core (bounded concurrency + linear time model); issue 4 replaces it.
- ``vllm_span``: the ``llm_request`` span exactly as vLLM v1 records it.
- ``openai_protocol``: request and response models.
"""

from instrumented_stack.engine.app import EngineConfig, create_engine_app
from instrumented_stack.engine.core import EngineCore, EngineRequest, EngineResult, RequestTimeline
from instrumented_stack.engine.simple_core import SimpleEngineCore, SimpleTimeModel

__all__ = [
    "EngineConfig",
    "EngineCore",
    "EngineRequest",
    "EngineResult",
    "RequestTimeline",
    "SimpleEngineCore",
    "SimpleTimeModel",
    "create_engine_app",
]
