"""Prompt Flow's tracing package (``promptflow-tracing``): ``start_trace`` patches the OpenAI SDK's ``create``
methods (each call an ``openai_chat`` span, ``span_type=LLM``), and ``@trace`` makes a span of each of the app's
own functions (``span_type=Function``): the agent loop ``support_agent``, a ``call_llm`` helper around every
model call (the name a user gives such a helper, as any-agent and Google ADK name their model-call spans), and
each tool (``lookup_order``, ``shipping_estimate``).

``@trace`` and the patched SDK record nothing while ``PF_DISABLE_TRACING`` is ``true``, its default when unset
(``promptflow/tracing/_utils.py`` ``is_tracing_disabled``), so the driver sets it to ``false``. ``start_trace`` adds
its resource attributes (``service.name`` and ``collection``) to the global tracer provider
already set (the driver's), so ``resource_attributes`` keeps the driver's service name. Its spans go through the
driver's exporter; no Prompt Flow service is involved (``promptflow-devkit`` is not installed). A tool span is a
``@trace`` function the loop runs around the tool's work: a traced generator, whose span Prompt Flow ends when
the generator is exhausted (its ``TracedIterator``), so it covers the work without being the current span.

Dependencies conflict with the project's venv (``promptflow-tracing`` 1.18.5 caps ``opentelemetry-sdk`` below
1.39): the driver runs in a side virtualenv (tests/realworld/README.md), made with ``python3 -m venv
/work/sidevenv/promptflow`` and ``pip install promptflow-tracing==1.18.5 openai==3.60.0
opentelemetry-exporter-otlp-proto-http==1.38.0 opentelemetry-exporter-otlp-proto-grpc==1.38.0
opentelemetry-instrumentation-fastapi==0.59b0 fastapi`` (the last three for ``instrumented_stack``'s own imports).
``opentelemetry-instrumentation-httpx`` 0.59b0, the newest for that SDK, cannot instrument ``httpx2``, so the
driver runs with ``--http-spans off`` (``HTTP_SPANS``): the recording transport injects ``traceparent``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

from instrumented_stack.realclients.chat_loop import run_chat_loop
from instrumented_stack.realclients.common import DriverRun

LIBRARIES = ("promptflow-tracing", "openai", "opentelemetry-sdk")
APP_SETTINGS = True
"""Runs :mod:`~instrumented_stack.realclients.chat_loop`, so it honours ``DriverOptions.app``."""
HTTP_SPANS = False
"""The HTTP client cannot be instrumented beside this SDK version (module docstring)."""


def run(run: DriverRun) -> None:
    os.environ["PF_DISABLE_TRACING"] = "false"
    import openai
    from promptflow.tracing import start_trace, trace

    start_trace(resource_attributes={"service.name": run.service_name}, collection="hotspan")
    client = openai.OpenAI(base_url=run.base_url, api_key="unused", http_client=run.http_client())

    def traced(function: Callable[..., Any], name: str) -> Callable[..., Any]:
        # Prompt Flow names a span after the function's qualified name: these are named as an app's
        # module-level functions would be.
        function.__name__ = function.__qualname__ = name
        return trace(function)

    def call_llm(**request: Any) -> Any:
        return client.chat.completions.create(**request)

    # The loop calls client.chat.completions.create; this client sends every call through call_llm.
    completions = SimpleNamespace(create=traced(call_llm, "call_llm"))
    traced_client = SimpleNamespace(chat=SimpleNamespace(completions=completions))

    def tool_function(name: str) -> Callable[[str], Iterator[None]]:
        def tool(arguments: str) -> Iterator[None]:
            yield

        return traced(tool, name)

    tools = {name: tool_function(name) for name in run.tool_functions()}

    @contextmanager
    def tool_span(name: str, _call_id: str, arguments: str) -> Iterator[None]:
        steps = tools[name](arguments)
        next(steps)
        yield
        next(steps, None)

    def support_agent(question: str) -> str:
        return run_chat_loop(run, traced_client, question, tool_span)  # type: ignore[arg-type]

    run.run_requests(traced(support_agent, "support_agent"))
