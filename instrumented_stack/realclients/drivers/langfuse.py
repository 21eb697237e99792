"""The Langfuse Python SDK (OTel-based since v3): ``@observe`` around the agent loop (an ``agent``
observation), a ``tool`` observation per tool run, and Langfuse's OpenAI drop-in (``langfuse.openai``),
which records each LLM call as a ``generation`` observation.

Its spans go to the OTLP endpoint instead of Langfuse's API through the client's ``span_exporter`` option,
on the driver's tracer provider (``tracer_provider``); ``should_export_span`` keeps every span (Langfuse's
default filter would drop the HTTP client spans and the app's root span). So here Langfuse's span processor
is the provider's only exporter (``EXPORTS_ITSELF``). Langfuse's API is never reached: ``base_url`` points
at a closed loopback port and nothing but spans is sent. With ``AppSettings.conversation`` the requests run inside
``propagate_attributes(session_id=...)``, so its observations carry ``langfuse.session.id``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

from instrumented_stack.realclients.chat_loop import run_chat_loop
from instrumented_stack.realclients.common import DriverRun

LIBRARIES = ("langfuse", "openai", "opentelemetry-instrumentation-httpx")
APP_SETTINGS = True
"""Runs :mod:`~instrumented_stack.realclients.chat_loop`, so it honours ``DriverOptions.app``."""
EXPORTS_ITSELF = True


def run(run: DriverRun) -> None:
    from langfuse import Langfuse, observe, propagate_attributes
    from langfuse.openai import OpenAI

    langfuse = Langfuse(
        public_key="pk-lf-local",
        secret_key="sk-lf-local",
        base_url="http://127.0.0.1:9",
        tracer_provider=run.provider,
        span_exporter=run.exporter,
        should_export_span=lambda _span: True,
    )
    client = OpenAI(base_url=run.base_url, api_key="unused", http_client=run.http_client())

    @contextmanager
    def tool_span(name: str, _call_id: str, arguments: str) -> Iterator[None]:
        with langfuse.start_as_current_observation(name=name, as_type="tool", input=arguments):
            yield

    @observe(name="support_agent", as_type="agent")
    def answer(question: str) -> str:
        return run_chat_loop(run, client, question, tool_span)

    # Langfuse's session API: every observation opened inside carries langfuse.session.id.
    with propagate_attributes(session_id=run.conversation_id) if run.options.app.conversation else nullcontext():
        run.run_requests(answer)
    langfuse.flush()
