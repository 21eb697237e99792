"""Real instrumentation libraries from PyPI driving the vLLM emulator, with ground truth measured without spans.

One driver per library (``drivers/``), each run in its own process (instrumentors patch globals):
``python -m instrumented_stack.realclients <driver> --llm-url URL --otlp-endpoint URL [--stream]
[--requests N] [--engine-spans on|off] [--http-spans on|off] [--truth-out PATH] [app settings]``. Each user
request is one trace; the driver writes the ground truth (``truth``) measured on its own clocks and on the wire
(``transport``). ``harness`` starts an emulator and runs a driver; ``capture`` writes the golden captures;
``faults`` holds the client-side fault switches (app settings of ``common.AppSettings`` for the drivers that run
the hand-written ``chat_loop``, and emulator changes).
"""

from __future__ import annotations

DRIVERS: dict[str, str] = {
    "openai_v2": "OpenAI SDK + opentelemetry-instrumentation-openai-v2 (GenAI semconv)",
    "openinference_openai": "OpenAI SDK + openinference-instrumentation-openai (OpenInference)",
    "openllmetry_openai": "OpenAI SDK + OpenLLMetry's opentelemetry-instrumentation-openai (Traceloop)",
    "pydantic_ai": "pydantic-ai's built-in instrumentation (GenAI semconv), an agent with two tools",
    "openai_agents": "OpenAI Agents SDK + openinference-instrumentation-openai-agents, an agent with two tools",
    "langgraph": "LangGraph + langchain-openai + OpenLLMetry's opentelemetry-instrumentation-langchain",
    "langfuse": "Langfuse Python SDK (@observe + its OpenAI wrapper), spans exported to the OTLP endpoint",
}
"""Driver name -> what it runs (module ``drivers.<name>``)."""
