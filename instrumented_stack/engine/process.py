"""Run an OpenAI-compatible engine server as a child process: start it, wait for ``/health``, stop it.

:class:`EngineProcess` is the one launcher for both engines: ``vllm serve`` (``vllm_backend``) and the
emulator's own entry point (``python -m instrumented_stack.service_main engine --port N``), so the code that
real vLLM depends on is exercised by the tests without a GPU.

- The child gets its own process session (``start_new_session``), so stopping it reaches every process it
  started (vLLM runs its engine core and workers as child processes).
- stdout and stderr go, merged, to a log file (never a pipe, which a chatty server would fill and block on);
  :meth:`EngineProcess.log_tail` reads its last lines, and every start-up error quotes them.
- Ready means ``GET <url>/health`` answered 200; a process that exits first, or is not ready in time, raises
  :class:`EngineStartError` with the exit status and the log tail.
- Stopping sends SIGTERM to the session (graceful: in-flight requests finish, spans are flushed), waits
  ``stop_timeout_s`` seconds, then SIGKILLs what is left.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

LOG_TAIL_LINES = 40
"""Lines of the server log quoted in a start-up error."""


class EngineStartError(RuntimeError):
    """The engine process exited, or did not answer ``/health``, during start-up; the message quotes its log."""


@dataclass(frozen=True, slots=True)
class EngineLaunch:
    """How to start one engine server.

    Attributes:
        name: a label for messages and the log file name (``vllm``, ``emulator``).
        command: the argv to run.
        url: root URL the server will listen on (``http(s)://127.0.0.1:<port>``), known before start.
        env: variables added to (and overriding) this process's environment.
        verify: TLS verification for the health check: a CA bundle path, or ``False`` (``True``: system CAs).
    """

    name: str
    command: tuple[str, ...]
    url: str
    env: Mapping[str, str] = field(default_factory=dict)
    verify: str | bool = True


class EngineProcess:
    """Context manager: the engine of ``launch`` as a child process while open.

    Args:
        launch: what to run and where it will listen.
        log_path: file that receives the merged stdout/stderr (parents created; truncated at start).
        start_timeout_s: longest wait for ``/health`` to answer 200, **seconds**.
        stop_timeout_s: longest wait for a graceful exit after SIGTERM, **seconds**, before SIGKILL.
        poll_interval_s: pause between health checks, **seconds**.

    Not thread-safe; one owner. ``start``/``__enter__`` block until ready.
    """

    def __init__(
        self,
        launch: EngineLaunch,
        log_path: Path,
        *,
        start_timeout_s: float = 600.0,
        stop_timeout_s: float = 30.0,
        poll_interval_s: float = 0.25,
    ) -> None:
        self.launch = launch
        self.log_path = log_path
        self._start_timeout_s = start_timeout_s
        self._stop_timeout_s = stop_timeout_s
        self._poll_interval_s = poll_interval_s
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Root URL of the server."""
        return self.launch.url

    @property
    def returncode(self) -> int | None:
        """Exit status once the process has ended, else ``None`` (also before start)."""
        return None if self._process is None else self._process.poll()

    def start(self) -> None:
        """Start the process and wait until ``/health`` answers 200.

        Raises:
            EngineStartError: the process exited during start-up, or was not ready within
                ``start_timeout_s`` (it is stopped first); the message holds the last log lines.
            OSError: the command could not be executed (e.g. not found).
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                list(self.launch.command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.launch.env},
                start_new_session=True,
            )
        deadline = time.monotonic() + self._start_timeout_s
        with httpx.Client(timeout=5.0, verify=self.launch.verify) as client:
            while True:
                status = self._process.poll()
                if status is not None:
                    raise EngineStartError(self._failure(f"exited with status {status} during start-up"))
                if self._healthy(client):
                    return
                if time.monotonic() > deadline:
                    self.stop()
                    raise EngineStartError(self._failure(f"not healthy within {self._start_timeout_s:g} s"))
                time.sleep(self._poll_interval_s)

    def _healthy(self, client: httpx.Client) -> bool:
        try:
            return client.get(f"{self.launch.url}/health").status_code == 200
        except httpx.HTTPError:
            return False

    def _failure(self, what: str) -> str:
        tail = "\n".join(self.log_tail())
        return f"{self.launch.name} engine ({self.launch.url}) {what}; log {self.log_path}, last lines:\n{tail}"

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        """The last ``lines`` lines of the server log (empty when there is none yet)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        return text.splitlines()[-lines:]

    def stop(self) -> int | None:
        """SIGTERM the process session, wait, SIGKILL on timeout; returns the exit status. Idempotent."""
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            _signal_session(process, signal.SIGTERM)
            try:
                process.wait(self._stop_timeout_s)
            except subprocess.TimeoutExpired:
                _signal_session(process, signal.SIGKILL)
                process.wait()
        # Children that outlived the leader (vLLM's engine core) are in the same session.
        _signal_session(process, signal.SIGKILL)
        return process.returncode

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _signal_session(process: subprocess.Popen[bytes], signum: int) -> None:
    """Send ``signum`` to the process group the child leads; nothing if it is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago.

    The socket is closed before the port is handed to a child process, so another process could take it in
    between; the launcher then fails with the child's "address in use" log line rather than hanging.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def command_line(command: Sequence[str]) -> str:
    """``command`` as one shell-quoted line, for logs and manifests."""
    return shlex.join(command)
