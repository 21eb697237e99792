"""The OpenAI Python SDK instrumented by OpenLLMetry's ``opentelemetry-instrumentation-openai`` (Traceloop).

Its module (``opentelemetry.instrumentation.openai``) differs from the official instrumentation's
(``opentelemetry.instrumentation.openai_v2``), so both install side by side; one process each, as both patch
the SDK. The instrumentation traces LLM calls only; the app's tool runs are spans of the shape Traceloop's
SDK ``@tool`` decorator writes (``<name>.tool``, ``traceloop.span.kind=tool``, ``traceloop.entity.name``),
opened by the driver without installing ``traceloop-sdk`` (which brings every instrumentation it has).
"""

from __future__ import annotations

from instrumented_stack.realclients.chat_loop import run_chat_requests
from instrumented_stack.realclients.common import DriverRun
from instrumented_stack.realclients.tool_spans import traceloop_tool

LIBRARIES = ("openai", "opentelemetry-instrumentation-openai", "opentelemetry-instrumentation-httpx")
APP_SETTINGS = True
"""Runs :mod:`~instrumented_stack.realclients.chat_loop`, so it honours ``DriverOptions.app``."""


def run(run: DriverRun) -> None:
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=run.provider)

    run_chat_requests(run, traceloop_tool)
