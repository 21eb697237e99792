"""Helpers for the dashboard tests: the UI served on loopback, and walking a built Dash component tree."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from a2wsgi import WSGIMiddleware
from dash.development.base_component import Component
from fastapi import FastAPI

from dashboards.app import build_dash_app
from query.service import QueryService


def mounted_ui(query: QueryService) -> FastAPI:
    """A tiny FastAPI app with the Dash UI over ``query`` mounted at ``/ui`` the way ``hotspan.app`` mounts it."""
    api = FastAPI()
    api.mount("/ui", WSGIMiddleware(build_dash_app(query).server))  # type: ignore[arg-type]
    return api


@contextmanager
def serving(app: FastAPI, start_timeout_s: float = 10.0) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a thread on a free loopback port; yields ``http://127.0.0.1:<port>``.

    The socket is bound before the server starts (port 0: the kernel picks a free port), so there is
    no race for the port. Waits at most ``start_timeout_s`` seconds for start-up.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    host, port = sock.getsockname()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="dash-ui-test", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + start_timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def walk(component: object) -> list[Component]:
    """Every component under ``component`` (itself included), depth first."""
    if not isinstance(component, Component):
        return []
    found = [component]
    children = getattr(component, "children", None)
    for child in children if isinstance(children, list | tuple) else [children]:
        found += walk(child)
    return found


def texts(component: object) -> list[str]:
    """Every string child under ``component``."""
    found = []
    for node in walk(component):
        children = getattr(node, "children", None)
        for child in children if isinstance(children, list | tuple) else [children]:
            if isinstance(child, str):
                found.append(child)
    return found
