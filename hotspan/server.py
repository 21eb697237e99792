"""``hotspan serve``: one process with OTLP/HTTP + REST + UI (uvicorn) and OTLP/gRPC."""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import sys
import threading
from dataclasses import dataclass

import grpc
import uvicorn
from fastapi import FastAPI

from alerts.config import load_alerts_config
from alerts.evaluator import SloEvaluator
from collector.grpc_receiver import start_grpc_server
from collector.ingest_pipeline import IngestPipeline
from hotspan.app import (
    Storage,
    create_admin_app,
    create_app,
    open_anomaly_loop,
    open_query,
    open_slo_evaluator,
    open_storage,
    open_trace_pipeline,
    trace_pipeline_config,
)
from hotspan.auth import Auth, check_bind, load_auth
from hotspan.auth import logs as auth_logs
from hotspan.health import StorageProbe
from hotspan.roles import PARTS, RoleParts, runs_incidents, runs_slo_evaluator
from hotspan.settings import ENVIRONMENT, Settings
from incidents.loop import AnomalyLoop
from processors.pipeline.trace_pipeline import TracePipeline
from query.service import QueryService

log = logging.getLogger(__name__)

GIL_SWITCH_INTERVAL_S = 0.001
"""How long a thread holding the GIL keeps it once another asks (Python's default is 5 ms). The event loop serving
HTTP does many short steps, each needing the GIL back from the decoder and inserter threads; at 5 ms a step, 80
senders' bodies queued enough steps ahead of a ``/healthz`` to delay it by 1.2-1.4 s while a static file server on the
same cores answered in 0.03 s; at 1 ms, 0.6 s (``tests/reliability/test_reliability_overload.py``)."""


class ListenError(RuntimeError):
    """A listener's address cannot be bound; the message names the port, why, and the setting that moves it."""


LISTENERS = {
    "http_port": ("OTLP/HTTP, API and UI", "--http-port"),
    "grpc_port": ("OTLP/gRPC", "--grpc-port"),
    "admin_port": ("admin health", None),
}
"""Per port setting: what listens there and its command-line option (None: environment only)."""


def listen_error(setting: str, host: str, port: int, reason: OSError) -> ListenError:
    """The :class:`ListenError` of the ``setting`` port (a key of :data:`LISTENERS`) on ``host`` failing with
    ``reason``."""
    what, option = LISTENERS[setting]
    moved = " or ".join(filter(None, (option, ENVIRONMENT[setting])))
    cause = "is in use" if reason.errno == errno.EADDRINUSE else f"cannot be bound ({reason.strerror})"
    return ListenError(f"{what} port {port} on {host} {cause}: stop what listens there, or set another with {moved}")


def bind_listener(setting: str, host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (0: a free port) as uvicorn binds its own (``SO_REUSEADDR``: a port a
    stopped server left in TIME_WAIT is free), for the ``setting`` port (a key of :data:`LISTENERS`). Bound here,
    not by uvicorn, so a clash is one :class:`ListenError` before anything starts rather than uvicorn's log line
    and a thread that exits.

    Raises:
        ListenError: the address cannot be bound (another process listens there, or it is not this host's).
    """
    listening = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
    except OSError as exc:
        listening.close()
        raise listen_error(setting, host, port, exc) from exc
    return listening


@dataclass(frozen=True)
class HttpListener:
    """One uvicorn server on a thread (and event loop) of its own: ``port`` is the bound one."""

    server: uvicorn.Server
    thread: threading.Thread
    port: int

    @classmethod
    def start(cls, app: FastAPI, listening: socket.socket, name: str) -> HttpListener:
        """Serve ``app`` on the address of ``listening`` (:func:`bind_listener`, which proved it free; closed here)
        on a daemon thread named ``name``; return once it accepts connections. Raises ``RuntimeError`` when it is
        not up in 30 s."""
        host, port = listening.getsockname()[:2]
        # uvicorn binds the address itself: serving a socket handed over refused some of eighty exporters
        # connecting at once (tests/reliability/test_reliability_overload.py), binding its own does not.
        listening.close()
        server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off"))
        thread = threading.Thread(target=server.run, name=name, daemon=True)
        thread.start()
        for _ in range(300):
            if server.started:
                return cls(server, thread, server.servers[0].sockets[0].getsockname()[1])
            if not thread.is_alive():
                raise RuntimeError(f"HTTP server failed to start on {host}:{port}")
            threading.Event().wait(0.1)
        raise RuntimeError(f"HTTP server did not start on {host}:{port} within 30 s")

    def stop(self) -> None:
        """Stop accepting and finish in-flight requests (waits up to 10 s)."""
        self.server.should_exit = True
        self.thread.join(timeout=10)


@dataclass
class RunningServer:
    """A started server; ``http_port``/``grpc_port`` are the bound ports (useful when 0 was asked). The parts its
    role does not run (``hotspan.roles``) are None: ``pipeline`` (ingest), ``trace_pipeline``; ``slo_evaluator`` and
    ``anomaly_loop`` outside the one process that owns the background work; ``grpc_server`` is None without ingest
    too."""

    settings: Settings
    storage: Storage
    http: HttpListener
    grpc_server: grpc.Server | None
    grpc_port: int
    pipeline: IngestPipeline | None
    health: StorageProbe
    trace_pipeline: TracePipeline | None = None
    slo_evaluator: SloEvaluator | None = None
    """The SLO evaluator (``HOTSPAN_ALERTS``), in the one process that owns the background work
    (:func:`hotspan.roles.runs_slo_evaluator`); None elsewhere."""
    query: QueryService | None = None
    anomaly_loop: AnomalyLoop | None = None
    """The anomaly loop (``HOTSPAN_ANOMALY``), in the one process that owns the incident lifecycle
    (:func:`hotspan.roles.runs_incidents`); None elsewhere."""
    admin: HttpListener | None = None
    """The admin listener (``HOTSPAN_ADMIN_PORT``: ``/healthz`` on a thread of its own); None without one."""

    @property
    def http_port(self) -> int:
        return self.http.port

    @property
    def base_url(self) -> str:
        return f"http://{self.settings.host}:{self.http_port}"

    def stop(self) -> None:
        """Stop accepting, finish in-flight requests (up to 5 s), release the store."""
        if self.grpc_server is not None:
            self.grpc_server.stop(grace=5).wait()
        self.http.stop()
        reads = getattr(self.http.server.config.app.state, "reads", None)
        if reads is not None:
            reads.close()
        if self.admin is not None:
            self.admin.stop()
        if self.slo_evaluator is not None:
            self.slo_evaluator.stop()
        if self.anomaly_loop is not None:
            self.anomaly_loop.stop()
        if self.trace_pipeline is not None:
            self.trace_pipeline.stop()
        if self.pipeline is not None:
            self.pipeline.stop()
        self.health.stop()
        self.storage.clickhouse.close()


def start_server(settings: Settings, storage: Storage | None = None) -> RunningServer:
    """Start the parts of ``settings.role`` (``hotspan.roles``): HTTP (uvicorn, in a thread) always, OTLP/gRPC
    with ingest, the trace pipeline on the role's share of traces with pipeline, the SLO evaluator (``HOTSPAN_ALERTS``)
    and the anomaly loop (``HOTSPAN_ANOMALY``) in the process owning the background work (``all``, pipeline worker
    0); wait until HTTP accepts connections.

    Raises:
        ListenError: a port could not be bound (in use, or the host is not this machine's).
        RuntimeError: the HTTP server did not come up in 30 s.
        hotspan.auth.InsecureBindError: ``settings.host`` is not loopback and no tokens are configured.
        hotspan.auth.AuthFileError: the auth file is missing or invalid.
        alerts.config.AlertsConfigError: the SLO file (``settings.alerts_path``) is missing or invalid.
    """
    auth = load_auth(settings)
    check_bind(settings.host, auth.authenticator)
    auth_logs.install()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    parts = PARTS[settings.role]
    with contextlib.ExitStack() as unwind:
        # Bound before the store opens: a port clash fails at once, with nothing started to stop.
        http_socket = unwind.enter_context(bind_listener("http_port", settings.host, settings.http_port))
        admin_socket = None
        if settings.admin_port >= 0:
            admin_socket = unwind.enter_context(bind_listener("admin_port", settings.host, settings.admin_port))
        if settings.grpc_port > 0 and parts.ingest:
            # gRPC binds its own socket, and says only that it could not (in a log line of its C core): the
            # address is tried here first, so a clash is a ListenError that says why.
            bind_listener("grpc_port", settings.host, settings.grpc_port).close()
        server = _start_parts(settings, storage, auth, parts, http_socket, admin_socket)
        unwind.pop_all()
    return server


def _start_parts(
    settings: Settings,
    storage: Storage | None,
    auth: Auth,
    parts: RoleParts,
    http_socket: socket.socket,
    admin_socket: socket.socket | None,
) -> RunningServer:
    """:func:`start_server` once its HTTP sockets are bound."""
    storage = storage or open_storage(settings)
    incidents = runs_incidents(settings)
    evaluates = runs_slo_evaluator(settings)
    # Read (and validated) before anything starts: the evaluator's SLOs, and where the anomaly loop sends (where the
    # SLO file's alerts go).
    alerts_config = (
        load_alerts_config(settings.alerts_path) if settings.alerts_path and (evaluates or incidents) else None
    )
    app = create_app(settings, storage, auth)
    background_query, slo_evaluator = None, None
    if evaluates or incidents:
        # The background work reads through the app's query room; a pipeline worker serves no reads: one of its own.
        background_query = app.state.query or open_query(settings, storage)
        if evaluates and alerts_config is not None:
            slo_evaluator = open_slo_evaluator(alerts_config, background_query)
    grpc_server, grpc_port = None, 0
    if settings.grpc_port >= 0 and parts.ingest:
        grpc_server, grpc_port = start_grpc_server(
            app.state.pipeline,
            app.state.ingest_metrics,
            settings.host,
            settings.grpc_port,
            settings.max_body_bytes,
            max_request_spans=settings.max_request_spans,
            interceptors=auth.grpc_interceptors(),
        )
    http = HttpListener.start(app, http_socket, "hotspan-http")
    admin = None
    if admin_socket is not None:
        admin = HttpListener.start(create_admin_app(app, settings), admin_socket, "hotspan-admin")
    trace_pipeline = None
    if parts.pipeline:
        # The query room's configuration when there is one: the API analyses traces with the same rule tables.
        rules = app.state.query.analysis.config if app.state.query else trace_pipeline_config(settings)
        trace_pipeline = open_trace_pipeline(
            storage,
            rules,
            app.state.trace_processors,
            app.state.tail_sampling_metrics,
            settings.pipeline_split,
            app.state.trace_pipeline_metrics,
        )
        trace_pipeline.start()
    if slo_evaluator is not None:
        slo_evaluator.start()
    anomaly_loop = None
    if incidents and background_query is not None:
        anomaly_loop = open_anomaly_loop(settings, background_query, alerts_config, http.port)
        anomaly_loop.start()
    return RunningServer(
        settings,
        storage,
        http,
        grpc_server,
        grpc_port,
        app.state.pipeline,
        app.state.health,
        trace_pipeline,
        slo_evaluator,
        app.state.query,
        anomaly_loop,
        admin,
    )
