"""The OTel-instrumented agent stack: gateway -> agent -> vLLM emulator, with workload replay.

Every service is a FastAPI app with its own ``TracerProvider`` (``service.name``), the real OTel SDK and
OTLP exporters, and real HTTP on loopback carrying W3C ``traceparent`` and ``baggage``:

- ``gateway``  (``POST /v1/agent``): turns ``x-tenant-id``/``x-sample-policy`` into baggage.
- ``agent``    (``POST /v1/invoke``): ``invoke_agent`` -> ``plan`` -> ``chat {model}`` (``llm_client``).
- ``engine``   (``/v1/completions``, ``/v1/chat/completions``, ``/health``): a vLLM emulator that
  records vLLM v1's ``llm_request`` span.

Modules: ``telemetry`` (providers, exporters, instrumentation), ``workload`` (Azure trace rows),
``tokenizer`` (token counts and synthetic prompts), ``serving`` (uvicorn in a thread), ``stack`` (the three
services on loopback), ``loadgen`` (users), ``runner`` (``run_stack``), ``capture`` (in-memory spans).
"""

from instrumented_stack.runner import RunSummary, run_stack

__all__ = ["RunSummary", "run_stack"]
