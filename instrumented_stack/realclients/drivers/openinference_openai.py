"""The OpenAI Python SDK instrumented by ``openinference-instrumentation-openai`` (OpenInference conventions).

The instrumentation traces LLM calls only; the app's tool runs are OpenInference TOOL spans opened by the
driver as the conventions describe them (``openinference.span.kind=TOOL``, ``tool.name``,
``tool.parameters``/``input.value``). With ``AppSettings.conversation`` the requests run inside OpenInference's
``using_session``, so its LLM spans carry ``session.id``.
"""

from __future__ import annotations

from contextlib import nullcontext

from instrumented_stack.realclients.chat_loop import run_chat_requests
from instrumented_stack.realclients.common import DriverRun
from instrumented_stack.realclients.tool_spans import openinference_tool

LIBRARIES = ("openai", "openinference-instrumentation-openai", "opentelemetry-instrumentation-httpx")
APP_SETTINGS = True
"""Runs :mod:`~instrumented_stack.realclients.chat_loop`, so it honours ``DriverOptions.app``."""


def run(run: DriverRun) -> None:
    from openinference.instrumentation import using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=run.provider)

    # OpenInference's session API: its instrumentors put session.id on every span they open inside.
    with using_session(run.conversation_id) if run.options.app.conversation else nullcontext():
        run_chat_requests(run, openinference_tool)
