"""pydantic-ai's built-in OpenTelemetry instrumentation (GenAI semantic conventions), an agent with two tools.

``Agent.instrument_all(InstrumentationSettings(tracer_provider=...))`` records the agent run, each model request
and each tool call; the model is ``OpenAIChatModel`` over an ``AsyncOpenAI`` client on the emulator. With
``--stream`` the run gets an ``event_stream_handler``, which makes pydantic-ai stream every model request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable
from typing import Any

from instrumented_stack.realclients.common import SYSTEM_PROMPT, TOOL_DESCRIPTIONS, TOOL_ORDER, TOOL_SHIPPING, DriverRun

LIBRARIES = ("pydantic-ai-slim", "openai", "opentelemetry-instrumentation-httpx")


def run(run: DriverRun) -> None:
    import openai
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = openai.AsyncOpenAI(base_url=run.base_url, api_key="unused", http_client=run.async_http_client())
    model = OpenAIChatModel(run.options.model, provider=OpenAIProvider(openai_client=client))
    Agent.instrument_all(InstrumentationSettings(tracer_provider=run.provider))
    agent = Agent(model, instructions=SYSTEM_PROMPT, name="support_agent")

    @agent.tool_plain(name=TOOL_ORDER, description=TOOL_DESCRIPTIONS[TOOL_ORDER])
    def lookup_order(order_id: str) -> str:
        return run.tool_work(TOOL_ORDER, order_id)

    @agent.tool_plain(name=TOOL_SHIPPING, description=TOOL_DESCRIPTIONS[TOOL_SHIPPING])
    def shipping_estimate(city: str) -> str:
        return run.tool_work(TOOL_SHIPPING, city)

    async def drain(_: RunContext[Any], events: AsyncIterable[Any]) -> None:
        async for _event in events:
            pass

    async def main() -> None:
        # One event loop for every request: the async HTTP client's pooled connections belong to it.
        for index in range(run.options.requests):
            with run.user_request(index) as question:
                await agent.run(question, event_stream_handler=drain if run.options.stream else None)

    asyncio.run(main())
