"""OpenTelemetry set-up shared by the stack's services.

Every service owns an explicit :class:`TracerProvider` (never the global one), so several services can
live in one process - the tests and the runner do exactly that - and each still reports its own
``service.name``. A service is handed a :class:`SpanProcessor`: tests pass a ``SimpleSpanProcessor`` around
an ``InMemorySpanExporter``, the demo a ``BatchSpanProcessor`` around an OTLP exporter
(:func:`otlp_span_processor`).

Propagation uses the process-wide W3C propagators of ``opentelemetry.propagate`` (``tracecontext`` and
``baggage`` unless ``OTEL_PROPAGATORS`` says otherwise).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Literal

import httpx
from fastapi import FastAPI
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor, RequestInfo, ResponseInfo
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from hotspan_sdk import BaggageSampler, BaggageSpanProcessor, HotspotSpanProcessor

OtlpProtocol = Literal["http/protobuf", "grpc"]
"""OTLP transports the stack can export with (same spelling as ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``)."""

SpanProcessorFactory = Callable[[str], SpanProcessor]
"""Builds the span processor of one service, given its ``service.name``."""

BAGGAGE_TENANT_ID = "tenant_id"
BAGGAGE_SAMPLE_POLICY = "sample_policy"
BAGGAGE_KEYS: tuple[str, ...] = (BAGGAGE_TENANT_ID, BAGGAGE_SAMPLE_POLICY)
"""W3C baggage keys the gateway sets; ``BaggageSpanProcessor`` copies them onto every span
(``processors/sdk/README.md``)."""


def build_tracer_provider(
    service_name: str,
    span_processor: SpanProcessor,
    *,
    hotspan_sdk: bool = True,
    resource_attributes: Mapping[str, AttributeValue] | None = None,
) -> TracerProvider:
    """A tracer provider for one service, exporting through ``span_processor``.

    Args:
        service_name: the ``service.name`` resource attribute; it wins over ``OTEL_SERVICE_NAME``.
        span_processor: receives every span the provider records; it is shut down with the provider.
        hotspan_sdk: instrument the service the way Hotspan asks its users to (``hotspan_sdk``):
            :class:`BaggageSampler` from ``HOTSPAN_SAMPLING_POLICIES`` (unset: keep every trace),
            :class:`BaggageSpanProcessor` copying :data:`BAGGAGE_KEYS` onto every span, and
            :class:`HotspotSpanProcessor` (adaptive p95) in front of ``span_processor``. The vLLM
            emulator passes ``False``: real vLLM runs none of them, and its span must look the same.
        resource_attributes: more resource attributes beside ``service.name`` (the engine's configuration,
            ``engine.config_resource``); ``service.instance.id`` is a fresh UUID per provider unless given.

    The provider does not register an ``atexit`` hook: its owner (the service's app lifespan) shuts it
    down, which flushes ``span_processor``.

    Raises:
        hotspan_sdk.ConfigError: ``HOTSPAN_SAMPLING_POLICIES`` holds an invalid policy table.
    """
    # Each provider is one running instance of its service. The SDK's default is one UUID per OS process, shared by
    # every provider in it: the stack's services, and two stacks serving side by side as in a rolling deploy, would
    # read as one instance.
    instance = {SERVICE_INSTANCE_ID: str(uuid.uuid4())}
    resource = Resource.create({**instance, **(resource_attributes or {}), SERVICE_NAME: service_name})
    if not hotspan_sdk:
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        provider.add_span_processor(span_processor)
        return provider
    provider = TracerProvider(resource=resource, sampler=BaggageSampler.from_env(), shutdown_on_exit=False)
    provider.add_span_processor(BaggageSpanProcessor(BAGGAGE_KEYS))
    provider.add_span_processor(HotspotSpanProcessor(span_processor, adaptive=True))
    return provider


def otlp_traces_url(base_url: str) -> str:
    """The OTLP/HTTP traces URL for a collector base URL (``http://127.0.0.1:4318`` -> ``.../v1/traces``).

    A URL that already ends in ``/v1/traces`` is returned unchanged.
    """
    trimmed = base_url.rstrip("/")
    return trimmed if trimmed.endswith("/v1/traces") else f"{trimmed}/v1/traces"


def otlp_span_exporter(
    endpoint: str, *, protocol: OtlpProtocol = "http/protobuf", timeout_s: float = 10.0
) -> SpanExporter:
    """The official OTLP span exporter for ``endpoint``.

    Args:
        endpoint: collector base URL; for ``http/protobuf`` the path ``/v1/traces`` is appended
            (e.g. ``http://127.0.0.1:4318``), for ``grpc`` it is the server address
            (e.g. ``http://127.0.0.1:4317``, plaintext).
        protocol: ``http/protobuf`` (default) or ``grpc``.
        timeout_s: per-export deadline in **seconds**, retries included.

    Raises:
        ValueError: unknown ``protocol``.
    """
    if protocol == "http/protobuf":
        return HttpSpanExporter(endpoint=otlp_traces_url(endpoint), timeout=timeout_s)
    if protocol == "grpc":
        return GrpcSpanExporter(endpoint=endpoint, insecure=True, timeout=timeout_s)
    raise ValueError(f"unknown OTLP protocol {protocol!r}; expected 'http/protobuf' or 'grpc'")


def check_otlp_endpoint(endpoint: str, *, protocol: OtlpProtocol = "http/protobuf", timeout_s: float = 5.0) -> None:
    """Export an empty batch to ``endpoint`` (what an OTLP receiver answers with success) before a run, so a
    collector that is down or a wrong address fails the run at once instead of every span being dropped
    behind the SDK's retry log lines. ``timeout_s``: seconds, retries included.

    Raises:
        ValueError: the endpoint did not accept the export (message names it and the protocol).
    """
    exporter = otlp_span_exporter(endpoint, protocol=protocol, timeout_s=timeout_s)
    try:
        result = exporter.export([])
    finally:
        exporter.shutdown()
    if result is not SpanExportResult.SUCCESS:
        raise ValueError(
            f"the OTLP endpoint {endpoint} ({protocol}) does not accept exports: is a collector serving there?"
        )


def otlp_span_processor(
    endpoint: str, *, protocol: OtlpProtocol = "http/protobuf", timeout_s: float = 10.0
) -> SpanProcessor:
    """A ``BatchSpanProcessor`` over :func:`otlp_span_exporter` (same arguments)."""
    return BatchSpanProcessor(otlp_span_exporter(endpoint, protocol=protocol, timeout_s=timeout_s))


def otlp_span_processors(
    endpoint: str, *, protocol: OtlpProtocol = "http/protobuf", timeout_s: float = 10.0
) -> SpanProcessorFactory:
    """A :data:`SpanProcessorFactory` giving every service its own :func:`otlp_span_processor`."""

    def make(_service_name: str) -> SpanProcessor:
        return otlp_span_processor(endpoint, protocol=protocol, timeout_s=timeout_s)

    return make


def instrument_fastapi_app(app: FastAPI, provider: TracerProvider, excluded_urls: str | None = None) -> None:
    """Trace ``app``'s requests as SERVER spans of ``provider`` (``opentelemetry-instrumentation-fastapi``).

    Incoming ``traceparent`` and ``baggage`` are extracted, so handlers see the caller's baggage. The
    per-message ``http send``/``http receive`` spans are left out: they add nothing to request latency
    analysis. Metrics go to a no-op meter provider, keeping services in one process independent.
    ``excluded_urls`` (comma-separated regular expressions, the instrumentation's own option) are not traced:
    a scraped ``/metrics`` is not a user request.
    """
    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=provider,
        meter_provider=NoOpMeterProvider(),
        exclude_spans=["receive", "send"],
        excluded_urls=excluded_urls,
    )


def instrument_httpx_client(client: httpx.AsyncClient | httpx.Client, provider: TracerProvider) -> None:
    """Trace ``client``'s calls as CLIENT spans of ``provider`` and inject W3C context and baggage.

    Each span also records the bodies' sizes as OTel semconv HTTP names them, from the ``Content-Length``
    headers (:func:`record_body_sizes`), which the instrumentation leaves out.
    """
    hook = _async_body_sizes if isinstance(client, httpx.AsyncClient) else record_body_sizes
    HTTPXClientInstrumentor.instrument_client(
        client, tracer_provider=provider, meter_provider=NoOpMeterProvider(), response_hook=hook
    )


HTTP_REQUEST_BODY_SIZE = "http.request.body.size"
HTTP_RESPONSE_BODY_SIZE = "http.response.body.size"
HTTP_RESPONSE_CONTENT_ENCODING = "http.response.header.content-encoding"


def record_body_sizes(span: Span, request: RequestInfo, response: ResponseInfo) -> None:
    """Set ``http.request.body.size`` and ``http.response.body.size`` (bytes, OTel semconv HTTP) from the
    messages' ``Content-Length``, and ``http.response.header.content-encoding`` (a list, as semconv records
    captured headers) when the response was encoded. A message without the header (chunked) records nothing."""
    for key, headers in ((HTTP_REQUEST_BODY_SIZE, request.headers), (HTTP_RESPONSE_BODY_SIZE, response.headers)):
        length = (headers or {}).get("content-length")
        if length is not None and length.isdigit():
            span.set_attribute(key, int(length))
    encoding = (response.headers or {}).get("content-encoding")
    if encoding:
        span.set_attribute(HTTP_RESPONSE_CONTENT_ENCODING, [encoding])


async def _async_body_sizes(span: Span, request: RequestInfo, response: ResponseInfo) -> None:
    record_body_sizes(span, request, response)
