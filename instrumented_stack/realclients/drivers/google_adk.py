"""Google ADK (``google-adk``) with its built-in OpenTelemetry spans, an ``LlmAgent`` with two function tools.

ADK records through the global tracer provider (the driver's). The model is ADK's LiteLLM wrapper
``LiteLlm(model="openai/<model>", client=AsyncOpenAI(...))``: LiteLLM's OpenAI provider sends through the
``AsyncOpenAI`` client it is given, whose ``httpx2`` client is the driver's recording one, so the truth is taken
on the wire as for the other drivers. ``--stream`` runs the agent with ``StreamingMode.SSE``.

LiteLLM prices every answer (``completion_cost``), counting tokens with the model's Hugging Face tokenizer, which
it downloads on first use: on a machine without internet that waits out the hub client's retries (about 20 s on
the first streamed call, while the response body is open, so the wire truth counts it). The driver sets
``HF_HUB_OFFLINE=1`` (huggingface_hub's switch: LiteLLM falls back to ``tiktoken`` at once) and
``LITELLM_LOCAL_MODEL_COST_MAP=True`` (LiteLLM's switch: its bundled price table, not the one it fetches) before
the import.

Dependencies conflict with the project's venv (ADK caps ``opentelemetry-api``/``-sdk`` at 1.44): the driver runs
in a side virtualenv (tests/realworld/README.md), made with ``python3 -m venv /work/sidevenv/adk`` and
``pip install google-adk==2.13.0 litellm==1.110.2 opentelemetry-exporter-otlp-proto-http==1.44.0
opentelemetry-instrumentation-httpx==0.65b0 opentelemetry-exporter-otlp-proto-grpc==1.44.0
opentelemetry-instrumentation-fastapi==0.65b0`` (the last two for ``instrumented_stack``'s own imports;
``fastapi`` comes with ADK); ``python -m instrumented_stack.realclients.capture --python
/work/sidevenv/adk/bin/python --drivers google_adk``.
"""

from __future__ import annotations

import asyncio
import os

from instrumented_stack.realclients.common import SYSTEM_PROMPT, TOOL_DESCRIPTIONS, DriverRun

LIBRARIES = ("google-adk", "litellm", "openai", "opentelemetry-sdk", "opentelemetry-instrumentation-httpx")
OFFLINE = {"HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def run(run: DriverRun) -> None:
    for variable, value in OFFLINE.items():
        os.environ.setdefault(variable, value)
    import openai
    from google.adk.agents import LlmAgent
    from google.adk.agents.run_config import RunConfig, StreamingMode
    from google.adk.models.lite_llm import LiteLlm
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    client = openai.AsyncOpenAI(base_url=run.base_url, api_key="unused", http_client=run.async_http_client())
    tools = []
    for name, work in run.tool_functions().items():
        # ADK builds a tool's declaration from the function's name, signature and docstring.
        work.__doc__ = TOOL_DESCRIPTIONS[name]
        tools.append(work)
    agent = LlmAgent(
        name="support_agent",
        model=LiteLlm(model=f"openai/{run.options.model}", client=client),
        instruction=SYSTEM_PROMPT,
        tools=tools,
    )
    sessions = InMemorySessionService()
    runner = Runner(app_name="support", agent=agent, session_service=sessions)
    config = RunConfig(streaming_mode=StreamingMode.SSE if run.options.stream else StreamingMode.NONE)

    async def main() -> None:
        # One event loop for every request: the async HTTP client's pooled connections belong to it.
        for index in range(run.options.requests):
            # Each user request starts a fresh conversation (session).
            session = await sessions.create_session(app_name="support", user_id="user")
            with run.user_request(index) as question:
                message = types.Content(role="user", parts=[types.Part(text=question)])
                async for _event in runner.run_async(
                    user_id="user", session_id=session.id, new_message=message, run_config=config
                ):
                    pass

    asyncio.run(main())
