"""Strands Agents (``strands-agents``) with its built-in OpenTelemetry tracing (GenAI semantic conventions, the
default spelling: no ``OTEL_SEMCONV_STABILITY_OPT_IN``), an agent with two ``@tool`` functions.

Strands records through the global tracer provider (the driver's): the agent invocation, each event-loop cycle,
each model call and each tool. The model is ``OpenAIModel`` over a pre-built ``AsyncOpenAI`` client on the
emulator (``client``: reused, not closed by Strands); its ``stream`` setting (default on) follows ``--stream``,
and the agent runs with ``invoke_async`` either way.
"""

from __future__ import annotations

import asyncio

from instrumented_stack.realclients.common import SYSTEM_PROMPT, TOOL_DESCRIPTIONS, DriverRun

LIBRARIES = ("strands-agents", "openai", "opentelemetry-instrumentation-httpx")


def run(run: DriverRun) -> None:
    import openai
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    client = openai.AsyncOpenAI(base_url=run.base_url, api_key="unused", http_client=run.async_http_client())

    tools = [tool(name=name, description=TOOL_DESCRIPTIONS[name])(work) for name, work in run.tool_functions().items()]
    agent = Agent(
        model=OpenAIModel(client=client, model_id=run.options.model, stream=run.options.stream),
        system_prompt=SYSTEM_PROMPT,
        name="support_agent",
        tools=tools,
        callback_handler=None,
    )

    async def main() -> None:
        # One event loop for every request: the async HTTP client's pooled connections belong to it.
        for index in range(run.options.requests):
            with run.user_request(index) as question:
                await agent.invoke_async(question)
                # Strands keeps the conversation in the agent; each user request starts a fresh one.
                agent.messages.clear()

    asyncio.run(main())
