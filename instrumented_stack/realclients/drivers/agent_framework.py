"""Microsoft Agent Framework (``agent-framework-core`` + ``agent-framework-openai``, Semantic Kernel's successor)
with its built-in OpenTelemetry instrumentation (GenAI semantic conventions), an agent with two tools.

``enable_instrumentation()`` switches the framework's telemetry layers on; they record through the global
tracer provider (the driver's). The agent is ``Agent`` over ``OpenAIChatCompletionClient`` (Chat Completions,
which vLLM serves) on an ``AsyncOpenAI`` client on the emulator; the tools are ``@tool`` functions.
``--stream`` runs ``agent.run(..., stream=True)`` and reads every update.
"""

from __future__ import annotations

import asyncio

from instrumented_stack.realclients.common import SYSTEM_PROMPT, TOOL_DESCRIPTIONS, DriverRun

LIBRARIES = ("agent-framework-core", "agent-framework-openai", "openai", "opentelemetry-instrumentation-httpx")


def run(run: DriverRun) -> None:
    import openai
    from agent_framework import Agent, tool
    from agent_framework.observability import enable_instrumentation
    from agent_framework.openai import OpenAIChatCompletionClient

    enable_instrumentation()
    client = openai.AsyncOpenAI(base_url=run.base_url, api_key="unused", http_client=run.async_http_client())

    tools = [tool(name=name, description=TOOL_DESCRIPTIONS[name])(work) for name, work in run.tool_functions().items()]
    agent = Agent(
        client=OpenAIChatCompletionClient(model=run.options.model, async_client=client),
        instructions=SYSTEM_PROMPT,
        name="support_agent",
        tools=tools,
    )

    async def ask(question: str) -> None:
        if run.options.stream:
            async for _update in agent.run(question, stream=True):
                pass
        else:
            await agent.run(question)

    async def main() -> None:
        # One event loop for every request: the async HTTP client's pooled connections belong to it.
        for index in range(run.options.requests):
            with run.user_request(index) as question:
                await ask(question)

    asyncio.run(main())
