"""The LangSmith SDK's OpenTelemetry export: ``@traceable`` around the agent loop (a ``chain`` run), a ``tool``
run per tool call (``langsmith.trace``) and the OpenAI client wrapped by ``wrap_openai`` (an ``llm`` run per
call), each run written as an OTel span through the global tracer provider (the driver's).

``LANGSMITH_TRACING_MODE=otel`` (the current switch; ``LANGSMITH_OTEL_ENABLED`` + ``LANGSMITH_OTEL_ONLY`` are
its older spelling) sends runs as spans only: LangSmith's API is never reached. Runs are turned into spans by
LangSmith's background tracing thread, so the driver waits for it (``wait_for_all_tracers``) before the spans
are flushed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from instrumented_stack.realclients.chat_loop import run_chat_loop
from instrumented_stack.realclients.common import DriverRun

LIBRARIES = ("langsmith", "openai", "opentelemetry-instrumentation-httpx")


def run(run: DriverRun) -> None:
    os.environ.update({"LANGSMITH_TRACING": "true", "LANGSMITH_TRACING_MODE": "otel", "LANGSMITH_API_KEY": "unused"})
    import openai
    from langsmith import trace, traceable
    from langsmith.run_trees import get_cached_client
    from langsmith.wrappers import wrap_openai

    client = wrap_openai(openai.OpenAI(base_url=run.base_url, api_key="unused", http_client=run.http_client()))

    @contextmanager
    def tool_span(name: str, _call_id: str, arguments: str) -> Iterator[None]:
        with trace(name, run_type="tool", inputs={"arguments": arguments}):
            yield

    @traceable(name="support_agent", run_type="chain")
    def answer(question: str) -> str:
        return run_chat_loop(run, client, question, tool_span)

    run.run_requests(answer)
    get_cached_client().flush()
