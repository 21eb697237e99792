"""Run one service of the stack as its own process: ``python -m instrumented_stack.service_main <service>``.

The supervisor (``supervisor.ProcessStack``) starts one such process per service. Arguments:

- ``service``: one of ``stack.SERVICES``;
- ``--config``: the wired :class:`~instrumented_stack.stack.StackConfig` as JSON (downstream URLs filled in);
- ``--otlp-endpoint`` and ``--otlp-protocol``: where the service exports its spans;
- ``--ssl-certfile``/``--ssl-keyfile``: serve HTTPS (the engine, when the stack runs with TLS).

The process binds a free loopback port, starts serving, then prints one line ``READY <url>`` on stdout.
SIGTERM or SIGINT shuts it down gracefully (in-flight requests finish, spans are flushed); exit status 0.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from instrumented_stack.serving import ThreadedServer, bind_loopback
from instrumented_stack.stack import SERVICES, StackConfig, build_app
from instrumented_stack.telemetry import otlp_span_processors

READY_PREFIX = "READY "


def main(argv: list[str] | None = None) -> int:
    """Serve one service until SIGTERM/SIGINT; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m instrumented_stack.service_main")
    parser.add_argument("service", choices=SERVICES)
    parser.add_argument("--config", required=True, help="wired StackConfig as JSON")
    parser.add_argument("--otlp-endpoint", required=True)
    parser.add_argument("--otlp-protocol", default="http/protobuf", choices=("http/protobuf", "grpc"))
    parser.add_argument("--ssl-certfile", type=Path)
    parser.add_argument("--ssl-keyfile", type=Path)
    args = parser.parse_args(argv)
    config = StackConfig.model_validate_json(args.config)
    app = build_app(args.service, config, otlp_span_processors(args.otlp_endpoint, protocol=args.otlp_protocol))
    server = ThreadedServer(
        app,
        bind_loopback(),
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
