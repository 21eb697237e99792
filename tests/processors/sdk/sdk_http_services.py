"""Two (or more) instrumented HTTP services on loopback, each with its own TracerProvider.

Each service runs ``http.server`` in a thread, extracts the W3C context (traceparent, tracestate,
baggage) with ``opentelemetry.propagate.extract``, starts a SERVER span, optionally calls the next
service with ``opentelemetry.propagate.inject``, and answers with the trace ID it saw (so a client
learns the IDs of traces that were not sampled too). Spans go through BaggageSampler,
BaggageSpanProcessor and HotspotSpanProcessor into the service's own InMemorySpanExporter, and into
``also_export_to`` (e.g. an OTLP exporter to a served Hotspan) when given, through a BatchSpanProcessor as a
deployed service would (:meth:`Service.flush` sends what it holds).
"""

import http.client
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry import baggage, context, propagate
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from hotspan_sdk import BaggageSampler, BaggageSpanProcessor, HotspotSpanProcessor, StaticRule

SET_BAGGAGE_HEADER = "x-set-baggage"
"""Request header ``key=value``: the first service adds this baggage before calling downstream."""


class Service:
    """One service: a loopback HTTP server whose handler traces each request and calls ``downstream``."""

    def __init__(
        self,
        name: str,
        policies: Mapping[str, object],
        downstream: "Service | None" = None,
        *,
        also_export_to: SpanExporter | None = None,
        hotspot_rules: Sequence[StaticRule] = (),
    ) -> None:
        self.name = name
        self.exporter = InMemorySpanExporter()
        exporting = SynchronousMultiSpanProcessor()
        exporting.add_span_processor(SimpleSpanProcessor(self.exporter))
        if also_export_to is not None:
            exporting.add_span_processor(BatchSpanProcessor(also_export_to))
        self.provider = TracerProvider(
            resource=Resource.create({"service.name": name}), sampler=BaggageSampler.from_config(policies)
        )
        self.provider.add_span_processor(BaggageSpanProcessor(["tenant_id"]))
        self.provider.add_span_processor(
            HotspotSpanProcessor(exporting, rules=hotspot_rules, adaptive=not hotspot_rules)
        )
        self._tracer = self.provider.get_tracer(f"{name}-server")
        self._downstream = downstream
        self._connections = threading.local()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"svc-{name}", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def flush(self) -> None:
        """Export every ended span now (``also_export_to`` included).

        Raises:
            TimeoutError: the export did not finish within 30 s.
        """
        if not self.provider.force_flush(30_000):
            raise TimeoutError(f"{self.name}: spans not exported within 30 s")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.provider.shutdown()

    def _call_downstream(self) -> None:
        assert self._downstream is not None
        connection = getattr(self._connections, "value", None)
        if connection is None:
            connection = http.client.HTTPConnection("127.0.0.1", self._downstream.port, timeout=10)
            self._connections.value = connection
        headers: dict[str, str] = {}
        propagate.inject(headers)
        connection.request("GET", "/", headers=headers)
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{self._downstream.name} answered {response.status}")

    def _handle(self, headers: Mapping[str, str]) -> str:
        token = context.attach(propagate.extract(headers))
        try:
            with self._tracer.start_as_current_span(f"{self.name} GET /", kind=SpanKind.SERVER) as span:
                trace_id = f"{span.get_span_context().trace_id:032x}"
                if self._downstream is not None:
                    extra = headers.get(SET_BAGGAGE_HEADER)
                    if extra:
                        key, _, value = extra.partition("=")
                        inner = context.attach(baggage.set_baggage(key, value))
                        try:
                            self._call_downstream()
                        finally:
                            context.detach(inner)
                    else:
                        self._call_downstream()
        finally:
            context.detach(token)
        return trace_id

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: one connection carries every request
            # Headers and body leave in two writes; with Nagle on, each response waits ~40 ms for
            # the peer's delayed ACK.
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                body = service._handle({key.lower(): value for key, value in self.headers.items()}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: the tests assert on spans, not on access logs."""

        return Handler


class Client:
    """Sends requests to a service over one keep-alive connection; returns the root trace IDs."""

    def __init__(self, service: Service) -> None:
        self._connection = http.client.HTTPConnection("127.0.0.1", service.port, timeout=10)

    def get(self, headers: Mapping[str, str]) -> str:
        self._connection.request("GET", "/", headers=dict(headers))
        response = self._connection.getresponse()
        body = response.read().decode()
        if response.status != 200:
            raise RuntimeError(f"status {response.status}: {body}")
        return body

    def close(self) -> None:
        self._connection.close()
