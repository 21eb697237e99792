"""The OpenAI Python SDK instrumented by ``opentelemetry-instrumentation-openai-v2`` (GenAI semantic conventions).

Message content capture is switched on (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY``, the
library's switch) to show what it records. The instrumentation traces LLM calls only; the app's tool runs
are GenAI ``execute_tool`` spans opened by the driver as the semantic conventions describe them
(``gen_ai.operation.name``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``).
"""

from __future__ import annotations

import os

from instrumented_stack.realclients.chat_loop import run_chat_requests
from instrumented_stack.realclients.common import DriverRun
from instrumented_stack.realclients.tool_spans import genai_tool

LIBRARIES = ("openai", "opentelemetry-instrumentation-openai-v2", "opentelemetry-instrumentation-httpx")
APP_SETTINGS = True
"""Runs :mod:`~instrumented_stack.realclients.chat_loop`, so it honours ``DriverOptions.app``."""


def run(run: DriverRun) -> None:
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=run.provider)

    run_chat_requests(run, genai_tool)
