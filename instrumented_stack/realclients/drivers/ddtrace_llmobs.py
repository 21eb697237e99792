"""Datadog's ``ddtrace`` with LLM Observability on, exporting its spans over OTLP itself: its OpenAI and ``httpx2``
integrations trace each model call (``openai.request``) and its HTTP request (``patch(httpx2=True)``: LLM
Observability turns on the LLM integrations only), ``@agent`` the agent loop and ``LLMObs.tool`` each tool run.

ddtrace (4.x) sends OTLP instead of its agent protocol when ``OTEL_TRACES_EXPORTER=otlp``, to
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (``http/protobuf`` here), from its native writer. LLM Observability itself
(``LLMObs.enable``, ``agentless_enabled=False``) would ship its events through a Datadog Agent; there is none, so
its writer fails quietly and only the APM spans, with the ``gen_ai.*`` attributes ddtrace writes on them, leave.
The driver's root span ``POST /ask`` is the OpenTelemetry SDK's: ddtrace continues its trace from the W3C context
(``traceparent``) the way a service called by an OpenTelemetry-traced front end would. ddtrace's ``httpx2``
integration injects ``traceparent`` into the model requests itself, so the recording transport does not
(``HTTP_SPANS``: no OpenTelemetry HTTP client spans).

Installed beside the project's venv, ddtrace would load its pytest plugin (entry point ``pytest11``) in every
test run and register an MLflow request-header provider, so the driver runs in a side virtualenv
(tests/realworld/README.md): ``python3 -m venv /work/sidevenv/ddtrace`` and ``pip install ddtrace==4.16.0
openai==3.60.0 opentelemetry-sdk==1.45.1 opentelemetry-exporter-otlp-proto-http==1.45.1
opentelemetry-exporter-otlp-proto-grpc==1.45.1 opentelemetry-instrumentation-fastapi==0.66b1
opentelemetry-instrumentation-httpx==0.66b1 fastapi==0.165.0 httpx`` (all but the first two for
``instrumented_stack``'s own imports).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from instrumented_stack.realclients.chat_loop import run_chat_loop
from instrumented_stack.realclients.common import DriverRun
from instrumented_stack.telemetry import otlp_traces_url

LIBRARIES = ("ddtrace", "openai", "opentelemetry-sdk")
APP_SETTINGS = True
"""Runs :mod:`~instrumented_stack.realclients.chat_loop`, so it honours ``DriverOptions.app``."""
HTTP_SPANS = False
"""ddtrace's own ``httpx2`` integration traces the HTTP requests (module docstring)."""


def run(run: DriverRun) -> None:
    os.environ.update(
        {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": otlp_traces_url(run.options.otlp_endpoint),
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            "DD_SERVICE": run.service_name,
            # No Datadog Agent: LLM Observability's own writer meets a closed port and gives up.
            "DD_TRACE_AGENT_URL": "http://127.0.0.1:9",
        }
    )
    import openai
    from ddtrace import patch
    from ddtrace.llmobs import LLMObs
    from ddtrace.llmobs.decorators import agent
    from ddtrace.propagation.http import HTTPPropagator
    from ddtrace.trace import tracer
    from opentelemetry import propagate

    LLMObs.enable(ml_app="support", agentless_enabled=False, integrations_enabled=True)
    patch(httpx2=True)
    http_client = run.http_client(inject_context=False)
    client = openai.OpenAI(base_url=run.base_url, api_key="unused", http_client=http_client)

    @contextmanager
    def tool_span(name: str, _call_id: str, arguments: str) -> Iterator[None]:
        with LLMObs.tool(name=name) as span:
            LLMObs.annotate(span=span, input_data=arguments)
            yield

    @agent(name="support_agent")
    def support_agent(question: str) -> str:
        return run_chat_loop(run, client, question, tool_span)

    def answer(question: str) -> str:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        tracer.context_provider.activate(HTTPPropagator.extract(carrier))
        return support_agent(question)

    run.run_requests(answer)
    LLMObs.flush()
    tracer.flush()
