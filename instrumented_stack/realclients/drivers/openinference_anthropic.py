"""The Anthropic Python SDK instrumented by ``openinference-instrumentation-anthropic`` (OpenInference).

The instrumentation wraps ``Messages.create`` and ``Messages.stream`` in LLM spans; the SDK's own spans are
turned off (``open_telemetry={"traces": False}``) so each call has one LLM span. The app is
:mod:`~instrumented_stack.realclients.messages_loop`; its tool runs are OpenInference TOOL spans.
"""

from __future__ import annotations

from instrumented_stack.realclients.common import DriverRun
from instrumented_stack.realclients.messages_loop import run_messages_requests
from instrumented_stack.realclients.tool_spans import openinference_tool

LIBRARIES = ("anthropic", "openinference-instrumentation-anthropic", "opentelemetry-instrumentation-httpx")


def run(run: DriverRun) -> None:
    from openinference.instrumentation.anthropic import AnthropicInstrumentor

    AnthropicInstrumentor().instrument(tracer_provider=run.provider)

    run_messages_requests(run, openinference_tool, sdk_traces=False)
