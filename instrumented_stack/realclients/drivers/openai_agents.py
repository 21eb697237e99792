"""The OpenAI Agents SDK instrumented by ``openinference-instrumentation-openai-agents``, an agent with two tools.

The instrumentor registers an OpenInference tracing processor as the SDK's only trace processor (its
default, ``exclusive_processor``), so nothing goes to OpenAI's trace backend. The model is
``OpenAIChatCompletionsModel`` over an ``AsyncOpenAI`` client on the emulator (Chat Completions, which vLLM
serves); ``--stream`` runs ``Runner.run_streamed``.
"""

from __future__ import annotations

import asyncio

from instrumented_stack.realclients.common import SYSTEM_PROMPT, TOOL_DESCRIPTIONS, TOOL_ORDER, TOOL_SHIPPING, DriverRun

LIBRARIES = (
    "openai-agents",
    "openinference-instrumentation-openai-agents",
    "openai",
    "opentelemetry-instrumentation-httpx",
)


def run(run: DriverRun) -> None:
    import openai
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    OpenAIAgentsInstrumentor().instrument(tracer_provider=run.provider)
    client = openai.AsyncOpenAI(base_url=run.base_url, api_key="unused", http_client=run.async_http_client())

    @function_tool(name_override=TOOL_ORDER, description_override=TOOL_DESCRIPTIONS[TOOL_ORDER])
    def lookup_order(order_id: str) -> str:
        return run.tool_work(TOOL_ORDER, order_id)

    @function_tool(name_override=TOOL_SHIPPING, description_override=TOOL_DESCRIPTIONS[TOOL_SHIPPING])
    def shipping_estimate(city: str) -> str:
        return run.tool_work(TOOL_SHIPPING, city)

    agent = Agent(
        name="support_agent",
        instructions=SYSTEM_PROMPT,
        tools=[lookup_order, shipping_estimate],
        model=OpenAIChatCompletionsModel(model=run.options.model, openai_client=client),
    )

    async def ask(question: str) -> None:
        if run.options.stream:
            streamed = Runner.run_streamed(agent, question)
            async for _event in streamed.stream_events():
                pass
        else:
            await Runner.run(agent, question)

    async def main() -> None:
        # One event loop for every request: the async HTTP client's pooled connections belong to it.
        for index in range(run.options.requests):
            with run.user_request(index) as question:
                await ask(question)

    asyncio.run(main())
