"""Semantic Kernel (``semantic-kernel``) with its built-in GenAI telemetry, a ``ChatCompletionAgent`` with two
kernel functions.

Semantic Kernel records through the global tracer provider (the driver's) once its experimental diagnostics are
on (``SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS`` and ``..._SENSITIVE``, read when its settings
load, so set before the import). The service is ``OpenAIChatCompletion`` over an ``AsyncOpenAI`` client on the
emulator whose ``httpx2`` client is the driver's recording one; the agent's default function choice (auto) runs
the tools. ``--stream`` reads ``agent.invoke_stream``; otherwise ``agent.get_response``.

Dependencies conflict with the project's venv (``pydantic`` < 2.14): the driver runs in a side virtualenv
(tests/realworld/README.md), made with ``python3 -m venv /work/sidevenv/sk`` and ``pip install
semantic-kernel==1.45.0 opentelemetry-exporter-otlp-proto-http==1.45.2 opentelemetry-instrumentation-httpx==0.66b2
opentelemetry-exporter-otlp-proto-grpc==1.45.2 opentelemetry-instrumentation-fastapi==0.66b2 fastapi==0.165.0`` (the
last three for ``instrumented_stack``'s own imports); ``python -m instrumented_stack.realclients.capture --python
/work/sidevenv/sk/bin/python --drivers semantic_kernel``.
"""

from __future__ import annotations

import asyncio
import os

from instrumented_stack.realclients.common import SYSTEM_PROMPT, TOOL_DESCRIPTIONS, DriverRun

LIBRARIES = ("semantic-kernel", "openai", "opentelemetry-sdk", "opentelemetry-instrumentation-httpx")
DIAGNOSTICS = (
    "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS",
    "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE",
)


def run(run: DriverRun) -> None:
    for variable in DIAGNOSTICS:
        os.environ[variable] = "true"
    import openai
    from semantic_kernel.agents import ChatCompletionAgent
    from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion
    from semantic_kernel.functions import KernelPlugin, kernel_function

    client = openai.AsyncOpenAI(base_url=run.base_url, api_key="unused", http_client=run.async_http_client())
    functions = [
        kernel_function(work, name=name, description=TOOL_DESCRIPTIONS[name])
        for name, work in run.tool_functions().items()
    ]
    agent = ChatCompletionAgent(
        service=OpenAIChatCompletion(ai_model_id=run.options.model, async_client=client),
        name="support_agent",
        instructions=SYSTEM_PROMPT,
        plugins=[KernelPlugin(name="support", functions=functions)],
    )

    async def ask(question: str) -> None:
        # No thread is passed: each user request starts a fresh conversation.
        if run.options.stream:
            async for _chunk in agent.invoke_stream(messages=question):
                pass
        else:
            await agent.get_response(messages=question)

    async def main() -> None:
        # One event loop for every request: the async HTTP client's pooled connections belong to it.
        for index in range(run.options.requests):
            with run.user_request(index) as question:
                await ask(question)

    asyncio.run(main())
