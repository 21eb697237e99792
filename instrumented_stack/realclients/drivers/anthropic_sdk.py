"""The Anthropic Python SDK's built-in OpenTelemetry tracing, a tool loop over the Messages API.

The SDK (``anthropic`` >= 2.16, module ``anthropic._tracing``) writes one CLIENT span per API call, retries and
the reading of a returned stream included, and sends that span's trace context with each HTTP attempt; it is on
by default and records through the provider given as ``open_telemetry={"tracer_provider": ...}``. The app is
:mod:`~instrumented_stack.realclients.messages_loop`; its tool runs are GenAI ``execute_tool`` spans of its own.
"""

from __future__ import annotations

from instrumented_stack.realclients.common import DriverRun
from instrumented_stack.realclients.messages_loop import run_messages_requests
from instrumented_stack.realclients.tool_spans import genai_tool

LIBRARIES = ("anthropic", "opentelemetry-instrumentation-httpx")


def run(run: DriverRun) -> None:

    run_messages_requests(run, genai_tool, sdk_traces=True)
