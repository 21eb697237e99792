"""The vLLM emulator: OpenAI-compatible HTTP front end, a model of vLLM v1's scheduler, vLLM's span and metrics.

- ``app``: ``create_engine_app(EngineConfig, SpanProcessor)``, the routes and request validation.
- ``core``: the ``EngineCore`` interface and the per-request timeline it reports.
- ``batching_core``: the step loop (asyncio) over the scheduler, with the speed factor.
- ``scheduler``: continuous batching, chunked prefill, preemption (vLLM v1's ``Scheduler``).
- ``kv_cache``: PagedAttention KV blocks and prefix caching by chained block hash.
- ``time_model``: the cost of one step.
- ``metrics``: vLLM's Prometheus metrics in a per-engine registry.
- ``vllm_span``: the ``llm_request`` span exactly as vLLM v1 records it.
- ``openai_protocol``: request and response models.
"""

from instrumented_stack.engine.app import EngineConfig, create_engine_app
from instrumented_stack.engine.batching_core import BatchingEngineCore
from instrumented_stack.engine.core import EngineCore, EngineRequest, EngineResult, RequestTimeline
from instrumented_stack.engine.metrics import EngineMetrics
from instrumented_stack.engine.scheduler import SchedulerConfig
from instrumented_stack.engine.time_model import StepTimeModel

__all__ = [
    "BatchingEngineCore",
    "EngineConfig",
    "EngineCore",
    "EngineMetrics",
    "EngineRequest",
    "EngineResult",
    "RequestTimeline",
    "SchedulerConfig",
    "StepTimeModel",
    "create_engine_app",
]
