"""The five services wired together on loopback, in one process: the fast mode for tests and notebooks.

gateway -> agent -> {retriever, tools, vLLM emulator}. Each service runs its own uvicorn server (thread +
event loop) and its own ``TracerProvider``, exactly as separate processes would, except that they share
the interpreter. ``supervisor.ProcessStack`` runs the same services as separate processes.

:func:`wire` is the one place that knows the dependencies: it fills every downstream URL into the configs
and, when the engine serves HTTPS, the certificate into the engine and the agent.
"""

from __future__ import annotations

import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, model_validator

from instrumented_stack.agent import UNSET_URL, AgentConfig, create_agent_app
from instrumented_stack.batch_load import BatchLoad, BatchLoadConfig
from instrumented_stack.engine import EngineConfig, create_engine_app
from instrumented_stack.engine.vllm_backend import EngineBackend, VllmSettings
from instrumented_stack.gateway import GatewayConfig, TenantKey, create_gateway_app
from instrumented_stack.loadgen import TenantCredentials
from instrumented_stack.retriever import RetrieverConfig, create_retriever_app
from instrumented_stack.serving import ThreadedServer, bind_loopback, socket_url
from instrumented_stack.telemetry import SpanProcessorFactory
from instrumented_stack.tls import CertificateFiles, generate_self_signed
from instrumented_stack.tools import ToolsConfig, create_tools_app

SERVICES: tuple[str, ...] = ("engine", "retriever", "tools", "agent", "gateway")
"""Start order: every service after the ones it calls."""

DEMO_TENANTS: tuple[TenantKey, ...] = (
    TenantKey(api_key="hotspan-demo-key-tenant-a", tenant_id="tenant-a", tier="P1"),
    TenantKey(api_key="hotspan-demo-key-tenant-b", tenant_id="tenant-b", tier="P2"),
    TenantKey(api_key="hotspan-demo-key-tenant-p0", tenant_id="tenant-p0", tier="P0"),
)
"""API keys of the demo stack (loopback only); the load generator sends them."""


class StackConfig(BaseModel):
    """Settings of the whole stack; downstream URLs are filled in by :func:`wire` once ports are bound."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: EngineConfig = Field(default_factory=EngineConfig)
    retriever: RetrieverConfig = Field(default_factory=RetrieverConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    agent: AgentConfig = Field(default_factory=lambda: AgentConfig(llm_base_url=UNSET_URL))
    gateway: GatewayConfig = Field(default_factory=lambda: GatewayConfig(agent_url=UNSET_URL, tenants=DEMO_TENANTS))
    engine_tls: bool = Field(default=False, description="engine serves HTTPS with a certificate made at start")
    engine_backend: EngineBackend = Field(
        default="emulator", description="emulator (in the stack) or vllm (vllm serve; processes mode only)"
    )
    vllm: VllmSettings = Field(default_factory=VllmSettings, description="how vllm runs when engine_backend=vllm")
    gateway_port: int = Field(default=0, ge=0, le=65535, description="0: a free port")
    batch_load: BatchLoadConfig | None = Field(
        default=None, description="a low-priority batch client sending to the gateway while the stack is open"
    )

    @model_validator(mode="after")
    def _agent_asks_the_served_model(self) -> Self:
        if self.agent.model != self.engine.served_model_name:
            raise ValueError(
                f"agent.model {self.agent.model!r} differs from engine.served_model_name "
                f"{self.engine.served_model_name!r}"
            )
        return self

    def credentials(self, tenants: tuple[str, ...] | None = None) -> list[TenantCredentials]:
        """Credentials of ``tenants`` (default: every configured tenant) for the load generator.

        Without configured API keys every name is sent as a plain ``x-tenant-id``. Raises ``ValueError`` for
        a tenant that has no key while keys are configured.
        """
        keys = {tenant.tenant_id: tenant.api_key for tenant in self.gateway.tenants}
        names = tenants or tuple(keys) or ("tenant-a",)
        if keys and (missing := [name for name in names if name not in keys]):
            raise ValueError(f"no API key for tenant(s) {missing}; configured: {sorted(keys)}")
        return [TenantCredentials(name, keys.get(name)) for name in names]


def wire(config: StackConfig, urls: dict[str, str], certificate: CertificateFiles | None) -> StackConfig:
    """``config`` with the downstream URLs of ``urls`` (service -> root URL) and the engine's CA filled in."""
    agent = config.agent.model_copy(
        update={
            "llm_base_url": urls["engine"],
            "retriever_url": urls["retriever"],
            "tools_url": urls["tools"],
            "llm_ca_file": certificate.certfile if certificate else None,
        }
    )
    gateway = config.gateway.model_copy(update={"agent_url": urls["agent"]})
    return config.model_copy(update={"agent": agent, "gateway": gateway})


def build_app(service: str, config: StackConfig, span_processors: SpanProcessorFactory) -> FastAPI:
    """The FastAPI app of ``service`` (one of :data:`SERVICES`) for a wired ``config``."""
    if service == "engine":
        return create_engine_app(config.engine, span_processors(config.engine.service_name))
    if service == "retriever":
        return create_retriever_app(config.retriever, span_processors(config.retriever.service_name))
    if service == "tools":
        return create_tools_app(config.tools, span_processors(config.tools.service_name))
    if service == "agent":
        return create_agent_app(config.agent, span_processors(config.agent.service_name))
    if service == "gateway":
        return create_gateway_app(config.gateway, span_processors(config.gateway.service_name))
    raise ValueError(f"unknown service {service!r}; expected one of {SERVICES}")


def start_batch_load(config: StackConfig, gateway_url: str) -> BatchLoad | None:
    """The batch client of ``config.batch_load``, started against ``gateway_url``; ``None`` without one. Raises
    ``ValueError`` when its tenant has no API key while keys are configured."""
    if config.batch_load is None:
        return None
    (credentials,) = config.credentials((config.batch_load.tenant,))
    batch = BatchLoad(config.batch_load, gateway_url, credentials)
    batch.start()
    return batch


@dataclass(frozen=True, slots=True)
class StackUrls:
    """Root URLs of a running stack."""

    gateway: str
    engine: str
    services: dict[str, str]


class Stack:
    """Context manager that serves the five services on ``127.0.0.1`` in this process while open.

    Args:
        config: stack settings (URLs are filled in on open).
        span_processors: builds each service's span processor from its ``service.name``.

    Opening raises ``ValueError`` when ``config.engine_backend`` is not ``emulator``: real vLLM is a process
    of its own that exports over OTLP (``supervisor.ProcessStack`` runs it).
    """

    def __init__(self, config: StackConfig, span_processors: SpanProcessorFactory) -> None:
        self._config = config
        self._span_processors = span_processors
        self._servers: list[ThreadedServer] = []
        self._urls: StackUrls | None = None
        self._tls_dir: tempfile.TemporaryDirectory[str] | None = None
        self._batch: BatchLoad | None = None

    @property
    def urls(self) -> StackUrls:
        """The running stack's URLs. Raises ``RuntimeError`` when the stack is not open."""
        if self._urls is None:
            raise RuntimeError("the stack is not open")
        return self._urls

    @property
    def gateway_url(self) -> str:
        """Root URL of the gateway. Raises ``RuntimeError`` when the stack is not open."""
        return self.urls.gateway

    def __enter__(self) -> Self:
        config = self._config
        if config.engine_backend != "emulator":
            raise ValueError(
                f"engine_backend {config.engine_backend!r} runs as its own process and exports its spans over "
                "OTLP: use supervisor.ProcessStack (hotspan stack run without --threads)"
            )
        sockets: dict[str, socket.socket] = {}
        try:
            certificate = None
            if config.engine_tls:
                self._tls_dir = tempfile.TemporaryDirectory(prefix="hotspan-stack-tls-")
                certificate = generate_self_signed(Path(self._tls_dir.name))
            for service in SERVICES:
                sockets[service] = bind_loopback(config.gateway_port if service == "gateway" else 0)
            urls = {
                name: socket_url(sock, "https" if name == "engine" and certificate else "http")
                for name, sock in sockets.items()
            }
            wired = wire(config, urls, certificate)
            for service in SERVICES:
                tls = certificate if service == "engine" else None
                server = ThreadedServer(
                    build_app(service, wired, self._span_processors),
                    sockets[service],
                    name=f"stack-{service}",
                    ssl_certfile=tls.certfile if tls else None,
                    ssl_keyfile=tls.keyfile if tls else None,
                )
                self._servers.append(server)
                server.start()
        except BaseException:
            self.close()
            for sock in sockets.values():
                sock.close()
            raise
        self._urls = StackUrls(gateway=urls["gateway"], engine=urls["engine"], services=urls)
        self._batch = start_batch_load(config, urls["gateway"])
        return self

    def close(self) -> None:
        """Stop the batch client (waiting for its requests), then every started service, front to back, and
        remove the certificate. Idempotent."""
        self._urls = None
        if self._batch is not None:
            self._batch.stop()
            self._batch = None
        while self._servers:
            self._servers.pop().stop()
        if self._tls_dir is not None:
            self._tls_dir.cleanup()
            self._tls_dir = None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
