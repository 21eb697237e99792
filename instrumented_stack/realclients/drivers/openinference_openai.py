"""The OpenAI Python SDK instrumented by ``openinference-instrumentation-openai`` (OpenInference conventions).

The instrumentation traces LLM calls only; the app's tool runs are OpenInference TOOL spans opened by the
driver as the conventions describe them (``openinference.span.kind=TOOL``, ``tool.name``,
``tool.parameters``/``input.value``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from instrumented_stack.realclients.chat_loop import run_chat_loop
from instrumented_stack.realclients.common import DriverRun

LIBRARIES = ("openai", "openinference-instrumentation-openai", "opentelemetry-instrumentation-httpx")


def run(run: DriverRun) -> None:
    import openai
    from openinference.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=run.provider)
    client = openai.OpenAI(base_url=run.base_url, api_key="unused", http_client=run.http_client())

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

    for index in range(run.options.requests):
        with run.user_request(index) as question:
            run_chat_loop(run, client, question, tool_span)
