"""Pydantic Logfire instrumenting the OpenAI Python SDK (``logfire.instrument_openai``), spans sent to the OTLP
endpoint instead of Logfire's service.

``logfire.configure(send_to_logfire=False, console=False)`` with one extra span processor (a batch processor over
its own OTLP/HTTP exporter to ``--otlp-endpoint``) records through Logfire's own tracer provider (the driver's
provider stays the global one, for the root span and the HTTP client spans); both share OpenTelemetry's context,
so every span lands in the request's trace. The agent loop runs inside a Logfire span ``support_agent``; each tool
run is a Logfire span written in the GenAI conventions (``execute_tool <name>``, ``gen_ai.operation.name``,
``gen_ai.tool.name``), as the app's own code writes it: Logfire's OpenAI instrumentation traces the LLM calls only.
A streamed call is a span that ends when the SDK returns the stream, then a zero-length log span
(``logfire.span_type=log``, ``duration`` in seconds) when the stream is consumed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from instrumented_stack.realclients.chat_loop import run_chat_loop
from instrumented_stack.realclients.common import DriverRun
from instrumented_stack.telemetry import otlp_traces_url

LIBRARIES = ("logfire", "openai", "opentelemetry-instrumentation-httpx")


def run(run: DriverRun) -> None:
    import logfire
    import openai
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporter = OTLPSpanExporter(endpoint=otlp_traces_url(run.options.otlp_endpoint))
    logfire.configure(
        send_to_logfire=False,
        console=False,
        service_name=run.service_name,
        additional_span_processors=[BatchSpanProcessor(exporter)],
    )
    client = openai.OpenAI(base_url=run.base_url, api_key="unused", http_client=run.http_client())
    # Logfire's default (suppress_other_instrumentation=True) silences the HTTP client instrumentation under each
    # call, its traceparent injection included, so a traced server's spans would start traces of their own;
    # --http-spans on turns that off to record the HTTP spans as the other drivers do.
    logfire.instrument_openai(client, suppress_other_instrumentation=not run.options.http_spans)

    @contextmanager
    def tool_span(name: str, call_id: str, _arguments: str) -> Iterator[None]:
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id}
        with logfire.span("execute_tool {tool}", tool=name, **attributes):
            yield

    for index in range(run.options.requests):
        with run.user_request(index) as question, logfire.span("support_agent"):
            run_chat_loop(run, client, question, tool_span)
    logfire.force_flush()
