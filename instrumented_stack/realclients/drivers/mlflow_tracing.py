"""MLflow Tracing (``mlflow-tracing``, MLflow 3's tracing SDK): ``mlflow.openai.autolog()`` traces each OpenAI
SDK call, ``@mlflow.trace`` the agent loop (span type ``AGENT``) and ``mlflow.start_span`` each tool run (span
type ``TOOL``), with MLflow's own span attributes (``mlflow.spanType``, ``mlflow.spanInputs`` ..., JSON-encoded).

Traces leave through MLflow's OTLP export (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, MLflow docs "Export MLflow
Traces via OTLP") instead of a tracking server; ``MLFLOW_USE_DEFAULT_TRACER_PROVIDER=false`` makes MLflow add its
span processor to the driver's global tracer provider, so MLflow's spans and the app's ``POST /ask`` share one
trace, and that processor is the provider's only exporter (``EXPORTS_ITSELF``). The GenAI-semconv translation
(``MLFLOW_ENABLE_OTEL_GENAI_SEMCONV``) stays at its default, off: the spans are what MLflow users send.
``MLFLOW_TRACKING_URI`` names a server that is never contacted (with OTLP export MLflow sends nothing there): with
no tracking URI, mlflow-tracing 3.17 looks for a local ``mlruns`` store when it starts its tracer, imports the full
MLflow's file store for it (``sqlparse``, not a dependency of mlflow-tracing), fails, and traces nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from instrumented_stack.realclients.chat_loop import run_chat_loop
from instrumented_stack.realclients.common import DriverRun
from instrumented_stack.telemetry import otlp_traces_url

LIBRARIES = ("mlflow-tracing", "openai", "opentelemetry-instrumentation-httpx")
APP_SETTINGS = True
"""Runs :mod:`~instrumented_stack.realclients.chat_loop`, so it honours ``DriverOptions.app``."""
EXPORTS_ITSELF = True


def run(run: DriverRun) -> None:
    os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = otlp_traces_url(run.options.otlp_endpoint)
    os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
    os.environ["MLFLOW_USE_DEFAULT_TRACER_PROVIDER"] = "false"
    os.environ["MLFLOW_TRACKING_URI"] = "http://127.0.0.1:9"
    import mlflow
    import openai
    from mlflow.entities import SpanType

    # Adds MLflow's span processor to the provider now, not at the first MLflow span: MLflow registers a trace
    # when its root span starts and drops the spans of a trace it never registered (the first request's).
    mlflow.tracing.enable()
    mlflow.openai.autolog()
    client = openai.OpenAI(base_url=run.base_url, api_key="unused", http_client=run.http_client())

    @contextmanager
    def tool_span(name: str, _call_id: str, arguments: str) -> Iterator[None]:
        with mlflow.start_span(name=name, span_type=SpanType.TOOL) as span:
            span.set_inputs({"arguments": arguments})
            yield

    @mlflow.trace(name="support_agent", span_type=SpanType.AGENT)
    def answer(question: str) -> str:
        return run_chat_loop(run, client, question, tool_span)

    run.run_requests(answer)
