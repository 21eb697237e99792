"""Run the stack as five processes, one per service, and stop them together.

:class:`ProcessStack` starts ``python -m instrumented_stack.service_main <service>`` for each service in
``stack.SERVICES`` order, waiting for each ``READY <url>`` line before starting the services that call it,
so every process is given its dependencies' real URLs. Each process exports its spans over OTLP itself.
With ``engine_tls`` the supervisor generates the certificate first and hands it to the engine (serve) and
the agent (trust).

With ``engine_backend="vllm"`` the engine is real vLLM instead of the emulator: ``vllm serve`` on the tiny
model (``engine.vllm_backend``), started by ``engine.process.EngineProcess`` and ready once ``/health``
answers; it exports its ``llm_request`` spans to the same OTLP endpoint. Its log is
``<stack cache>/vllm.log`` (``env.stack_cache_dir``), quoted in the error when it fails to start.

Closing sends SIGTERM to every process, front to back, waits for a graceful exit (spans flushed), and kills
what is still running after ``stop_timeout_s``. A process's stderr is passed through to the supervisor's.
"""

from __future__ import annotations

import os
import select
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from instrumented_stack.batch_load import BatchLoad
from instrumented_stack.engine.process import EngineProcess
from instrumented_stack.engine.vllm_backend import vllm_engine_process
from instrumented_stack.env import module_process_env, stack_cache_dir
from instrumented_stack.service_main import READY_PREFIX, service_command
from instrumented_stack.stack import SERVICES, StackConfig, StackUrls, start_batch_load, wire
from instrumented_stack.telemetry import OtlpProtocol
from instrumented_stack.tls import CertificateFiles, generate_self_signed


class ServiceStartError(RuntimeError):
    """A service process exited or stayed silent during start-up."""


class ProcessStack:
    """Context manager: the stack's services as child processes while open.

    Args:
        config: stack settings (URLs are filled in as services come up).
        otlp_endpoint: collector every service exports to.
        protocol: OTLP transport.
        start_timeout_s: longest wait for one service's ``READY`` line, **seconds**.
        stop_timeout_s: longest wait for one process to exit after SIGTERM, **seconds**.
    """

    def __init__(
        self,
        config: StackConfig,
        otlp_endpoint: str,
        *,
        protocol: OtlpProtocol = "http/protobuf",
        start_timeout_s: float = 60.0,
        stop_timeout_s: float = 30.0,
    ) -> None:
        self._config = config
        self._endpoint = otlp_endpoint
        self._protocol = protocol
        self._start_timeout_s = start_timeout_s
        self._stop_timeout_s = stop_timeout_s
        self._processes: list[subprocess.Popen[str]] = []
        self._urls: StackUrls | None = None
        self._batch: BatchLoad | None = None
        self._tls_dir: tempfile.TemporaryDirectory[str] | None = None
        self._engine: EngineProcess | None = None
        self._model_dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def urls(self) -> StackUrls:
        """The running stack's URLs. Raises ``RuntimeError`` when the stack is not open."""
        if self._urls is None:
            raise RuntimeError("the stack is not open")
        return self._urls

    @property
    def gateway_url(self) -> str:
        """Root URL of the gateway."""
        return self.urls.gateway

    def __enter__(self) -> Self:
        try:
            certificate = None
            if self._config.engine_tls:
                self._tls_dir = tempfile.TemporaryDirectory(prefix="hotspan-stack-tls-")
                certificate = generate_self_signed(Path(self._tls_dir.name))
            urls: dict[str, str] = {}
            for service in SERVICES:
                # Dependencies come first in SERVICES, so their URLs are known; the rest stay placeholders.
                placeholders = {name: urls.get(name, "http://127.0.0.1:0") for name in SERVICES}
                wired = wire(self._config, placeholders, certificate)
                if service == "engine" and wired.engine_backend == "vllm":
                    urls[service] = self._start_vllm(wired, certificate)
                else:
                    urls[service] = self._start(service, wired, certificate if service == "engine" else None)
        except BaseException:
            self.close()
            raise
        self._urls = StackUrls(gateway=urls["gateway"], engine=urls["engine"], services=urls)
        self._batch = start_batch_load(self._config, urls["gateway"])
        return self

    def _start_vllm(self, config: StackConfig, tls: CertificateFiles | None) -> str:
        self._model_dir = tempfile.TemporaryDirectory(prefix="hotspan-stack-vllm-")
        engine = vllm_engine_process(
            config.engine,
            Path(self._model_dir.name),
            otlp_endpoint=self._endpoint,
            protocol=self._protocol,
            settings=config.vllm,
            tls=tls,
            log_path=stack_cache_dir() / "vllm.log",
        )
        self._engine = engine
        engine.start()
        return engine.url

    def _start(self, service: str, config: StackConfig, tls: CertificateFiles | None) -> str:
        command = service_command(
            service,
            config,
            self._endpoint,
            protocol=self._protocol,
            ssl_certfile=tls.certfile if tls else None,
            ssl_keyfile=tls.keyfile if tls else None,
        )
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=os.environ | module_process_env())
        self._processes.append(process)
        deadline = time.monotonic() + self._start_timeout_s
        stdout = process.stdout
        if stdout is None:
            raise ServiceStartError(f"{service}: no stdout pipe")
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise ServiceStartError(f"{service}: exited with status {process.returncode} during start-up")
            ready, _, _ = select.select([stdout], [], [], 0.1)
            if ready:
                line = stdout.readline()
                if line.startswith(READY_PREFIX):
                    return line[len(READY_PREFIX) :].strip()
        raise ServiceStartError(f"{service}: not ready within {self._start_timeout_s} s")

    def close(self) -> None:
        """Stop the batch client (waiting for its requests), then every process front to back (SIGTERM, then
        kill after the timeout). Idempotent."""
        self._urls = None
        if self._batch is not None:
            self._batch.stop()
            self._batch = None
        while self._processes:
            process = self._processes.pop()
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(self._stop_timeout_s)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            if process.stdout is not None:
                process.stdout.close()
        if self._engine is not None:
            self._engine.stop()
            self._engine = None
        if self._model_dir is not None:
            self._model_dir.cleanup()
            self._model_dir = None
        if self._tls_dir is not None:
            self._tls_dir.cleanup()
            self._tls_dir = None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
