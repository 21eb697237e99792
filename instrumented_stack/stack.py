"""The three services wired together on loopback, in one process: gateway -> agent -> vLLM emulator.

Each service runs its own uvicorn server (thread + event loop) and its own ``TracerProvider``, exactly as
separate processes would, except that they share the interpreter. Issue 4 moves each service into its
own process; the app factories already take everything they need as arguments.
"""

from __future__ import annotations

import socket
from types import TracebackType
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from instrumented_stack.agent import AgentConfig, create_agent_app
from instrumented_stack.engine import EngineConfig, create_engine_app
from instrumented_stack.gateway import GatewayConfig, create_gateway_app
from instrumented_stack.serving import ThreadedServer, bind_loopback, socket_url
from instrumented_stack.telemetry import SpanProcessorFactory

_UNSET_URL = "http://127.0.0.1:0"
"""Placeholder downstream URL; :class:`Stack` fills in the bound addresses."""


class StackConfig(BaseModel):
    """Settings of the whole stack; downstream URLs are filled in by :class:`Stack` once ports are bound."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: EngineConfig = Field(default_factory=EngineConfig)
    agent: AgentConfig = Field(default_factory=lambda: AgentConfig(llm_base_url=_UNSET_URL))
    gateway: GatewayConfig = Field(default_factory=lambda: GatewayConfig(agent_url=_UNSET_URL))
    engine_port: int = Field(default=0, ge=0, le=65535, description="0: a free port")
    agent_port: int = Field(default=0, ge=0, le=65535, description="0: a free port")
    gateway_port: int = Field(default=0, ge=0, le=65535, description="0: a free port")

    @model_validator(mode="after")
    def _agent_asks_the_served_model(self) -> Self:
        if self.agent.model != self.engine.served_model_name:
            raise ValueError(
                f"agent.model {self.agent.model!r} differs from engine.served_model_name "
                f"{self.engine.served_model_name!r}"
            )
        return self


class Stack:
    """Context manager that serves the stack on ``127.0.0.1`` while open.

    Args:
        config: the stack's settings.
        span_processors: called once per service with its ``service.name``; the processor it returns
            is shut down (flushed) when the stack closes.

    On exit the services stop front to back (gateway, agent, engine), each after its in-flight
    requests finish, so every span has ended and been handed to its processor when ``__exit__`` returns.
    """

    def __init__(self, config: StackConfig, span_processors: SpanProcessorFactory) -> None:
        self._config = config
        self._span_processors = span_processors
        self._servers: list[ThreadedServer] = []
        self._gateway_url: str | None = None

    @property
    def gateway_url(self) -> str:
        """Root URL of the gateway (``http://127.0.0.1:<port>``).

        Raises:
            RuntimeError: the stack is not open.
        """
        if self._gateway_url is None:
            raise RuntimeError("the stack is not open")
        return self._gateway_url

    def __enter__(self) -> Self:
        config = self._config
        sockets: list[socket.socket] = []
        try:
            for port in (config.engine_port, config.agent_port, config.gateway_port):
                sockets.append(bind_loopback(port))
            engine_url, agent_url, gateway_url = (socket_url(sock) for sock in sockets)
            agent_config = config.agent.model_copy(update={"llm_base_url": engine_url})
            gateway_config = config.gateway.model_copy(update={"agent_url": agent_url})
            apps = [
                create_engine_app(config.engine, self._span_processors(config.engine.service_name)),
                create_agent_app(agent_config, self._span_processors(agent_config.service_name)),
                create_gateway_app(gateway_config, self._span_processors(gateway_config.service_name)),
            ]
            for name, app, sock in zip(("engine", "agent", "gateway"), apps, sockets, strict=True):
                server = ThreadedServer(app, sock, name=f"stack-{name}")
                self._servers.append(server)
                server.start()
        except BaseException:
            self.close()
            for sock in sockets:
                sock.close()
            raise
        self._gateway_url = gateway_url
        return self

    def close(self) -> None:
        """Stop every started service, front to back. Idempotent."""
        self._gateway_url = None
        while self._servers:
            self._servers.pop().stop()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
