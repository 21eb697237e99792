"""The OpenAI Python SDK instrumented by ``openinference-instrumentation-openai`` (OpenInference conventions).

The instrumentation traces LLM calls only; the app's tool runs are OpenInference TOOL spans opened by the
driver as the conventions describe them (``openinference.span.kind=TOOL``, ``tool.name``,
``tool.parameters``/``input.value``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from instrumented_stack.realclients.chat_loop import run_chat_requests
from instrumented_stack.realclients.common import DriverRun

LIBRARIES = ("openai", "openinference-instrumentation-openai", "opentelemetry-instrumentation-httpx")


def run(run: DriverRun) -> None:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=run.provider)

    @contextmanager
    def tool_span(name: str, call_id: str, arguments: str) -> Iterator[None]:
        attributes = {
            "openinference.span.kind": "TOOL",
            "tool.name": name,
            "tool_call.id": call_id,
            "input.value": arguments,
            "input.mime_type": "application/json",
        }
        with run.tracer.start_as_current_span(name, attributes=attributes):
            yield

    run_chat_requests(run, tool_span)
