"""Serving an ASGI app with uvicorn in a background thread, on a loopback socket bound up front.

Binding first (port 0 picks a free port) lets the caller learn every service's URL before any app is
built, so downstream URLs can go into upstream configs without a race for ports.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp

LOOPBACK = "127.0.0.1"


def bind_loopback(port: int = 0) -> socket.socket:
    """A listening-ready TCP socket bound to ``127.0.0.1:port`` (0: a free port).

    Raises:
        OSError: the port is taken or not allowed.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
    except OSError:
        sock.close()
        raise
    return sock


def socket_url(sock: socket.socket, scheme: str = "http") -> str:
    """``<scheme>://<host>:<port>`` of a bound socket."""
    host, port = sock.getsockname()[:2]
    return f"{scheme}://{host}:{port}"


SERVER_KEEP_ALIVE_S = 30
"""Seconds a stack service keeps an idle connection open: longer than its clients' pools keep one (httpx's
``keepalive_expiry``, 5 s), so the client always drops an idle connection first (the rule for any keep-alive
pair: the server's idle timeout above the client's)."""


class ThreadedServer:
    """One uvicorn server in a daemon thread with its own event loop.

    ``start`` returns once the app's lifespan has started and the socket accepts connections; ``stop``
    asks for a graceful shutdown (in-flight requests finish, the lifespan's shutdown runs) and waits.
    Not restartable. With ``ssl_certfile`` and ``ssl_keyfile`` (PEM paths) it serves HTTPS.
    """

    def __init__(
        self,
        app: ASGIApp,
        sock: socket.socket,
        *,
        name: str,
        ssl_certfile: Path | None = None,
        ssl_keyfile: Path | None = None,
    ) -> None:
        self._sock = sock
        self.url = socket_url(sock, "https" if ssl_certfile else "http")
        """``http(s)://127.0.0.1:<port>``."""
        self._server = uvicorn.Server(
            uvicorn.Config(
                app,
                log_level="warning",
                access_log=False,
                lifespan="on",
                timeout_graceful_shutdown=30,
                # Idle connections are kept longer than any client of the stack keeps them (httpx: 5 s): with
                # uvicorn's own 5 s the two timers raced, and a request sent on a connection the server was closing
                # failed with a bare ReadError (an agent's model call, once, under the tier flood).
                timeout_keep_alive=SERVER_KEEP_ALIVE_S,
                # Each request's task starts from an empty context. Without it, a request that arrives on a
                # connection while another is in flight is started from inside the finishing request's task, whose
                # context (that request's SERVER span) the new task copies, and asyncio can leak context vars
                # between tasks (cpython#140947; uvicorn#2912, #3158): the OpenTelemetry ASGI middleware then makes
                # the request an INTERNAL child of that span. On a live run of the stack one gateway's later requests
                # all became children of one request, a 6,745-span trace that opened an incident on a clean minute.
                reset_contextvars=True,
                ssl_certfile=str(ssl_certfile) if ssl_certfile else None,
                ssl_keyfile=str(ssl_keyfile) if ssl_keyfile else None,
            )
        )
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, name=name, daemon=True)

    def start(self, timeout_s: float = 10.0) -> None:
        """Start serving; wait at most ``timeout_s`` **seconds** for start-up.

        Raises:
            RuntimeError: the server exited or did not start in time.
        """
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"{self._thread.name}: server exited during start-up")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self._thread.name}: server did not start within {timeout_s} s")
            time.sleep(0.01)

    def stop(self, timeout_s: float = 60.0) -> None:
        """Shut down gracefully and wait at most ``timeout_s`` **seconds** for the thread to end."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        self._sock.close()
