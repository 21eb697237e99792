"""Real instrumentation libraries from PyPI driving the vLLM emulator, with ground truth measured without spans.

One driver per library (``drivers/``), each run in its own process (instrumentors patch globals):
``python -m instrumented_stack.realclients <driver> --llm-url URL --otlp-endpoint URL [--stream]
[--requests N] [--engine-spans on|off] [--http-spans on|off] [--truth-out PATH] [app settings]``. Each user
request is one trace; the driver writes the ground truth (``truth``) measured on its own clocks and on the wire
(``transport``). ``harness`` starts an emulator and runs a driver; ``capture`` writes the golden captures;
``faults`` holds the client-side fault switches (app settings of ``common.AppSettings`` for the drivers that run
the hand-written ``chat_loop``, and emulator changes). A Node library's driver (``vercel_ai``) runs a script of
``node/`` (its npm packages installed by ``node_packages``) that measures the same truth in Node. Drivers whose
library cannot be installed beside the project's (``SIDE_VENV_DRIVERS``) run under another interpreter
(``harness.run_driver(..., python=...)``).
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
    "agent_framework": "Microsoft Agent Framework's built-in instrumentation (GenAI semconv), an agent with two tools",
    "langsmith": "LangSmith SDK's OTel export (@traceable + wrap_openai), spans only (tracing mode otel)",
    "logfire": "Pydantic Logfire's OpenAI instrumentation (logfire.instrument_openai), spans to the OTLP endpoint",
    "strands": "Strands Agents' built-in tracing (GenAI semconv), OpenAIModel, an agent with two tools",
    "mlflow_tracing": "MLflow Tracing (mlflow.openai.autolog, @mlflow.trace, mlflow.start_span), OTLP export",
    "anthropic_sdk": "Anthropic Python SDK's built-in OpenTelemetry tracing, a tool loop over the Messages API",
    "openinference_anthropic": "Anthropic Python SDK + openinference-instrumentation-anthropic (OpenInference)",
    "openllmetry_anthropic": "Anthropic Python SDK + OpenLLMetry's opentelemetry-instrumentation-anthropic",
    "vercel_ai": "Vercel AI SDK (npm ai + @ai-sdk/openai) telemetry in Node, generateText/streamText with two tools",
    "google_adk": "Google ADK's built-in tracing, LiteLlm over an AsyncOpenAI client, two tools (side venv)",
    "semantic_kernel": "Semantic Kernel's GenAI telemetry, ChatCompletionAgent, two kernel functions (side venv)",
    "promptflow": "Prompt Flow tracing (start_trace, @trace), a call_llm helper around each OpenAI call (side venv)",
    "ddtrace_llmobs": "ddtrace LLM Observability (OpenAI, httpx2, @agent, tools) exporting OTLP itself (side venv)",
}
"""Driver name -> what it runs (module ``drivers.<name>``)."""

SIDE_VENV_DRIVERS: dict[str, str] = {
    "google_adk": "google.adk",
    "semantic_kernel": "semantic_kernel",
    "promptflow": "promptflow.tracing",
    "ddtrace_llmobs": "ddtrace",
}
"""Drivers whose library's dependencies conflict with the project's venv -> the module they import; they run
under a side virtualenv's interpreter (the driver's docstring says how to make it)."""
