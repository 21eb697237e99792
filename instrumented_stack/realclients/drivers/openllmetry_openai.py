"""The OpenAI Python SDK instrumented by OpenLLMetry's ``opentelemetry-instrumentation-openai`` (Traceloop).

Its module (``opentelemetry.instrumentation.openai``) differs from the official instrumentation's
(``opentelemetry.instrumentation.openai_v2``), so both install side by side; one process each, as both patch
the SDK. The instrumentation traces LLM calls only; the app's tool runs are spans of the shape Traceloop's
SDK ``@tool`` decorator writes (``<name>.tool``, ``traceloop.span.kind=tool``, ``traceloop.entity.name``),
opened by the driver without installing ``traceloop-sdk`` (which brings every instrumentation it has).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from instrumented_stack.realclients.chat_loop import run_chat_requests
from instrumented_stack.realclients.common import DriverRun

LIBRARIES = ("openai", "opentelemetry-instrumentation-openai", "opentelemetry-instrumentation-httpx")


def run(run: DriverRun) -> None:
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=run.provider)

    @contextmanager
    def tool_span(name: str, _call_id: str, arguments: str) -> Iterator[None]:
        attributes = {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": name,
            "traceloop.entity.input": arguments,
        }
        with run.tracer.start_as_current_span(f"{name}.tool", attributes=attributes):
            yield

    run_chat_requests(run, tool_span)
