"""The Anthropic Python SDK instrumented by OpenLLMetry's ``opentelemetry-instrumentation-anthropic`` (Traceloop).

The instrumentation wraps the SDK's message methods in LLM spans; the SDK's own spans are turned off
(``open_telemetry={"traces": False}``) so each call has one LLM span. The app is
:mod:`~instrumented_stack.realclients.messages_loop`; its tool runs have the shape of Traceloop's ``@tool``
decorator (``<tool>.tool``, ``traceloop.span.kind=tool``).
"""

from __future__ import annotations

from instrumented_stack.realclients.common import DriverRun
from instrumented_stack.realclients.messages_loop import run_messages_requests
from instrumented_stack.realclients.tool_spans import traceloop_tool

LIBRARIES = ("anthropic", "opentelemetry-instrumentation-anthropic", "opentelemetry-instrumentation-httpx")


def run(run: DriverRun) -> None:
    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

    AnthropicInstrumentor().instrument(tracer_provider=run.provider)

    run_messages_requests(run, traceloop_tool, sdk_traces=False)
