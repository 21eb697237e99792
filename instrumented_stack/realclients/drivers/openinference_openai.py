"""The OpenAI Python SDK instrumented by ``openinference-instrumentation-openai`` (OpenInference conventions).

The instrumentation traces LLM calls only; the app's tool runs are OpenInference TOOL spans opened by the
driver as the conventions describe them (``openinference.span.kind=TOOL``, ``tool.name``,
``tool.parameters``/``input.value``).
"""

from __future__ import annotations

from instrumented_stack.realclients.chat_loop import run_chat_requests
from instrumented_stack.realclients.common import DriverRun

LIBRARIES = ("openai", "openinference-instrumentation-openai", "opentelemetry-instrumentation-httpx")
APP_SETTINGS = True
"""Runs :mod:`~instrumented_stack.realclients.chat_loop`, so it honours ``DriverOptions.app``."""


def run(run: DriverRun) -> None:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=run.provider)

    def tool_span(name: str, call_id: str, arguments: str) -> tuple[str, dict[str, str]]:
        attributes = {
            "openinference.span.kind": "TOOL",
            "tool.name": name,
            "tool_call.id": call_id,
            "input.value": arguments,
            "input.mime_type": "application/json",
        }
        return name, attributes

    run_chat_requests(run, tool_span)
