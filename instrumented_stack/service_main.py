"""Run one service of the stack as its own process: ``python -m instrumented_stack.service_main <service>``.

The supervisor (``supervisor.ProcessStack``) starts one such process per service. Arguments:

- ``service``: one of ``stack.SERVICES``;
- ``--config``: the wired :class:`~instrumented_stack.stack.StackConfig` as JSON (downstream URLs filled in);
- ``--otlp-endpoint`` and ``--otlp-protocol``: where the service exports its spans;
- ``--ssl-certfile``/``--ssl-keyfile``: serve HTTPS (the engine, when the stack runs with TLS);
- ``--port``: the loopback port to bind (default 0: a free one).

The process binds its loopback port, starts serving, then prints one line ``READY <url>`` on stdout.
:func:`service_command` builds this command line (the supervisor uses it); :func:`emulator_launch` wraps it
for ``engine.process.EngineProcess``, the launcher ``vllm serve`` goes through, on a port chosen up front.
SIGTERM or SIGINT shuts it down gracefully (in-flight requests finish, spans are flushed); exit status 0.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from instrumented_stack.engine.process import EngineLaunch, free_loopback_port
from instrumented_stack.env import module_process_env
from instrumented_stack.serving import ThreadedServer, bind_loopback
from instrumented_stack.stack import SERVICES, StackConfig, build_app
from instrumented_stack.telemetry import OtlpProtocol, otlp_span_processors

READY_PREFIX = "READY "


def service_command(
    service: str,
    config: StackConfig,
    otlp_endpoint: str,
    *,
    protocol: OtlpProtocol = "http/protobuf",
    port: int = 0,
    ssl_certfile: Path | None = None,
    ssl_keyfile: Path | None = None,
) -> list[str]:
    """The argv that runs ``service`` of the wired ``config`` as its own process (this module's ``main``), in an
    environment with :func:`~instrumented_stack.env.module_process_env` added."""
    command = [
        sys.executable,
        "-m",
        "instrumented_stack.service_main",
        service,
        "--config",
        config.model_dump_json(),
        "--otlp-endpoint",
        otlp_endpoint,
        "--otlp-protocol",
        protocol,
        "--port",
        str(port),
    ]
    if ssl_certfile is not None and ssl_keyfile is not None:
        command += ["--ssl-certfile", str(ssl_certfile), "--ssl-keyfile", str(ssl_keyfile)]
    return command


def emulator_launch(
    config: StackConfig,
    otlp_endpoint: str,
    *,
    protocol: OtlpProtocol = "http/protobuf",
    port: int | None = None,
) -> EngineLaunch:
    """The emulator (``service_main engine``) as an ``EngineLaunch``, started the way ``vllm serve`` is.

    ``config`` must be wired (``stack.wire``); ``port`` ``None`` picks a free loopback port. The launch is
    plain HTTP (the emulator's TLS goes through ``--ssl-*``, which the supervisor passes itself).
    """
    chosen = port if port is not None else free_loopback_port()
    command = service_command("engine", config, otlp_endpoint, protocol=protocol, port=chosen)
    return EngineLaunch(
        name="emulator", command=tuple(command), url=f"http://127.0.0.1:{chosen}", env=module_process_env()
    )


def main(argv: list[str] | None = None) -> int:
    """Serve one service until SIGTERM/SIGINT; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m instrumented_stack.service_main")
    parser.add_argument("service", choices=SERVICES)
    parser.add_argument("--config", required=True, help="wired StackConfig as JSON")
    parser.add_argument("--otlp-endpoint", required=True)
    parser.add_argument("--otlp-protocol", default="http/protobuf", choices=("http/protobuf", "grpc"))
    parser.add_argument("--ssl-certfile", type=Path)
    parser.add_argument("--ssl-keyfile", type=Path)
    parser.add_argument("--port", type=int, default=0, help="loopback port (default 0: a free one)")
    args = parser.parse_args(argv)
    config = StackConfig.model_validate_json(args.config)
    app = build_app(args.service, config, otlp_span_processors(args.otlp_endpoint, protocol=args.otlp_protocol))
    server = ThreadedServer(
        app,
        bind_loopback(args.port),
        name=f"stack-{args.service}",
        ssl_certfile=args.ssl_certfile,
        ssl_keyfile=args.ssl_keyfile,
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server.start()
    print(f"{READY_PREFIX}{server.url}", flush=True)
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
