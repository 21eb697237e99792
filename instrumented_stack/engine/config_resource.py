"""The engine's configuration as OpenTelemetry resource attributes, so a trace store can tell engine
configurations apart (Hotspan's throughput-latency view groups vLLM's ``llm_request`` spans by them).

Real vLLM records none of its configuration on its spans: its tracer provider is the SDK's default
``TracerProvider()`` (``vllm/tracing.py`` ``init_tracer``), whose resource comes from
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` only, and ``llm_request`` carries per-request
``gen_ai.*`` attributes (``vllm_span``), not even the model name in v1 (vLLM's production stack, too, sets the
engine's resource with ``OTEL_RESOURCE_ATTRIBUTES``: ``tutorials/12-distributed-tracing.md`` of
vllm-project/production-stack). So the configuration travels as
resource attributes: the emulator sets them on its tracer provider, and ``vllm_backend`` passes the same
names to real vLLM through ``OTEL_RESOURCE_ATTRIBUTES``. Names are Hotspan's own (no semantic convention
covers engine flags), ``vllm.config.`` plus the ``vllm serve`` flag's name in snake case:

======================================  =========================================  ======
attribute                               ``vllm serve`` flag                        type
======================================  =========================================  ======
``vllm.config.model``                   ``--served-model-name``                    string
``vllm.config.max_num_seqs``            ``--max-num-seqs``                         int
``vllm.config.max_num_batched_tokens``  ``--max-num-batched-tokens``               int
``vllm.config.enable_chunked_prefill``  ``--enable-chunked-prefill``               bool
``vllm.config.enable_prefix_caching``   ``--enable-prefix-caching``                bool
``vllm.config.tensor_parallel_size``    ``--tensor-parallel-size`` (when known)    int
======================================  =========================================  ======

The emulator has no tensor parallelism and reports no size.
"""

from __future__ import annotations

from opentelemetry.util.types import AttributeValue

from instrumented_stack.engine.scheduler import SchedulerConfig

CONFIG_PREFIX = "vllm.config."


class EngineConfigAttributes:
    """Resource attribute names of an engine's configuration (the module docstring's table)."""

    MODEL = f"{CONFIG_PREFIX}model"
    MAX_NUM_SEQS = f"{CONFIG_PREFIX}max_num_seqs"
    MAX_NUM_BATCHED_TOKENS = f"{CONFIG_PREFIX}max_num_batched_tokens"
    ENABLE_CHUNKED_PREFILL = f"{CONFIG_PREFIX}enable_chunked_prefill"
    ENABLE_PREFIX_CACHING = f"{CONFIG_PREFIX}enable_prefix_caching"
    TENSOR_PARALLEL_SIZE = f"{CONFIG_PREFIX}tensor_parallel_size"


def engine_config_attributes(
    model: str, scheduler: SchedulerConfig, *, tensor_parallel_size: int | None = None
) -> dict[str, AttributeValue]:
    """The resource attributes of an engine serving ``model`` with ``scheduler``'s limits; the tensor-parallel
    size only when given."""
    names = EngineConfigAttributes
    attributes: dict[str, AttributeValue] = {
        names.MODEL: model,
        names.MAX_NUM_SEQS: scheduler.max_num_seqs,
        names.MAX_NUM_BATCHED_TOKENS: scheduler.max_num_batched_tokens,
        names.ENABLE_CHUNKED_PREFILL: scheduler.enable_chunked_prefill,
        names.ENABLE_PREFIX_CACHING: scheduler.enable_prefix_caching,
    }
    if tensor_parallel_size is not None:
        attributes[names.TENSOR_PARALLEL_SIZE] = tensor_parallel_size
    return attributes


def resource_attributes_env(attributes: dict[str, AttributeValue]) -> str:
    """``attributes`` as ``OTEL_RESOURCE_ATTRIBUTES`` takes them: ``key=value`` pairs joined by commas,
    booleans lower case (as the OTLP exporter writes them), other values as ``str`` gives them.

    Raises:
        ValueError: a value holds ``,`` or ``=``, which the variable's format cannot carry unescaped.
    """
    pairs = []
    for key, value in attributes.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if "," in text or "=" in text:
            raise ValueError(
                f"resource attribute {key}={text!r}: ',' and '=' cannot be passed in OTEL_RESOURCE_ATTRIBUTES"
            )
        pairs.append(f"{key}={text}")
    return ",".join(pairs)
