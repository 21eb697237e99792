"""The ``hotspan`` command: ``serve``, ``import``, ``demo``, ``migrate`` (and ``stack``, ``auth``, ``alerts``)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from alerts.cli import add_alerts_parser, run_alerts_command
from alerts.config import AlertsConfigError
from hotspan.auth.cli import add_auth_parser, run_auth_command, tenant_argument
from hotspan.settings import ROLES, Settings, SettingsError, load_settings
from storage.tenancy import DEFAULT_TENANT

if TYPE_CHECKING:
    from hotspan.server import RunningServer

log = logging.getLogger("hotspan")


def _add_store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, help="data directory (env HOTSPAN_DATA_DIR, default ./.hotspan)")
    parser.add_argument("--clickhouse-dsn", help="chdb:///path or http(s)://... (env HOTSPAN_CLICKHOUSE_DSN)")


def _add_server_options(parser: argparse.ArgumentParser) -> None:
    _add_store_options(parser)
    parser.add_argument("--host", help="bind address (env HOTSPAN_HOST, default 127.0.0.1)")
    parser.add_argument("--http-port", type=int, help="OTLP/HTTP + REST + UI port (default 4318)")
    parser.add_argument("--grpc-port", type=int, help="OTLP/gRPC port (default 4317, -1 disables)")
    parser.add_argument("--auth-file", type=Path, help="hashed bearer tokens per tenant (env HOTSPAN_AUTH_FILE)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="hotspan", description="Trace analysis for LLM agent stacks on vLLM.")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the collector, REST API and UI in one process")
    _add_server_options(serve)
    serve.add_argument(
        "--role",
        choices=ROLES,
        help="what this process runs: all (default), collector, query or pipeline (env HOTSPAN_ROLE; "
        "pipeline workers split the traces by HOTSPAN_PIPELINE_SHARD=i/N)",
    )

    migrate = commands.add_parser("migrate", help="apply the pending schema migrations (on a cluster: ON CLUSTER)")
    _add_store_options(migrate)
    migrate.add_argument(
        "--reapply",
        action="store_true",
        help="apply every migration again, recorded or not: catches up a cluster node that lost its tables",
    )

    importer = commands.add_parser(
        "import", help="load trace files: OTLP, Tempo, ConsoleSpanExporter, Jaeger, Zipkin, Langfuse"
    )
    importer.add_argument("paths", nargs="+", type=Path, help="files to import; the format is detected")
    importer.add_argument("--endpoint", help="send to a running Hotspan (e.g. http://127.0.0.1:4318) over OTLP/HTTP")
    importer.add_argument("--no-progress", action="store_true", help="no progress bar")
    importer.add_argument(
        "--tenant",
        type=tenant_argument,
        help="tenant to store the spans under (local store only, default 'default'; with --endpoint the token in "
        "env HOTSPAN_TOKEN decides)",
    )
    _add_store_options(importer)

    demo = commands.add_parser("demo", help="serve Hotspan and drive the instrumented agent stack against it")
    _add_server_options(demo)
    demo.add_argument(
        "--requests",
        type=int,
        default=40,
        help="user requests of the stack's first run, the baseline of the demo's incident (20 or more; default 40)",
    )
    demo.add_argument("--exit", action="store_true", help="exit after the stack's run instead of serving on")

    from instrumented_stack.cli import add_stack_parser

    add_stack_parser(commands)
    add_auth_parser(commands)
    add_alerts_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # One INFO line per HTTP call drowns the demo's own output.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    args = build_parser().parse_args(argv)
    try:
        commands = {
            "serve": _serve,
            "migrate": _migrate,
            "import": _import,
            "demo": _demo,
            "stack": _stack,
            "auth": run_auth_command,
            "alerts": run_alerts_command,
        }
        return commands[args.command](args)
    except (SettingsError, AlertsConfigError) as exc:
        print(f"hotspan: {exc}", file=sys.stderr)
        return 2


def _settings(args: argparse.Namespace, **more: object):
    return load_settings(
        **more,
        data_dir=args.data_dir,
        clickhouse_dsn=args.clickhouse_dsn,
        host=getattr(args, "host", None),
        http_port=getattr(args, "http_port", None),
        grpc_port=getattr(args, "grpc_port", None),
        auth_file=getattr(args, "auth_file", None),
        role=getattr(args, "role", None),
    )


def _store_in_use(settings: Settings, remedy: str) -> str | None:
    """Why this process cannot open ``settings``' embedded store (another Hotspan holds it), in one line ending
    with ``remedy``; None when it may try. Asked before opening: chDB's own failure is a long traceback whose
    reason is only on its stderr."""
    from storage.clickhouse import embedded_store_held

    held = embedded_store_held(settings.clickhouse_dsn)
    if held is None:
        return None
    under_data_dir = held == (settings.data_dir / "clickhouse").resolve()
    where = f"data dir {settings.data_dir}" if under_data_dir else f"embedded store {held}"
    return f"another Hotspan is using {where} ({remedy})"


def _start(command: str, settings: Settings) -> RunningServer | None:
    """The started server of ``command`` (``serve``, ``demo``), or None once the reason it cannot start is printed
    in one line: its store is in use, a port is taken, the store cannot be opened; or, in one line per problem, a
    rule table it reads is invalid."""
    from analysis.rule_files import RuleFileError
    from hotspan.server import ListenError, start_server
    from storage.clickhouse import StorageError

    busy = _store_in_use(settings, "stop it, or pass another --data-dir")
    if busy is None:
        try:
            return start_server(settings)
        except (ListenError, StorageError, RuleFileError) as exc:
            busy = str(exc)
    print(f"hotspan {command}: {busy}", file=sys.stderr)
    return None


def _serve(args: argparse.Namespace) -> int:
    from hotspan.roles import PARTS

    server = _start("serve", _settings(args))
    if server is None:
        return 2
    # The assembled server's objects (modules, the app, Dash's layout) live as long as this process: kept out of the
    # garbage collector's full passes, which hold the GIL, every thread's, while they walk every object. A heavy read
    # makes such passes often; walking the server's own objects too made each 0.1-0.3 s on two loaded cores, and the
    # OTLP answers waited that long (tests/reliability/test_reliability_reads.py). Here, not in start_server: a
    # process that starts servers again and again (the tests) would keep every frozen cycle.
    gc.freeze()
    print(f"Hotspan ({server.settings.role}): health {server.base_url}/healthz", flush=True)
    if server.admin is not None:
        print(f"Admin health: http://{server.settings.host}:{server.admin.port}/healthz", flush=True)
    if server.pipeline is not None:
        grpc = f"{server.settings.host}:{server.grpc_port}" if server.settings.grpc_port >= 0 else "off"
        print(f"OTLP/HTTP: {server.base_url}/v1/traces   OTLP/gRPC: {grpc}", flush=True)
    if server.trace_pipeline is not None:
        print(f"Analysing quiet traces, share {server.settings.pipeline_shard}", flush=True)
    if PARTS[server.settings.role].query:
        print(f"Hotspan UI: {server.base_url}/ui/   API docs: {server.base_url}/docs", flush=True)
    _wait_for_interrupt()
    server.stop()
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from clickhouse_connect.driver.exceptions import DatabaseError

    from storage.clickhouse import ClickHouse, StorageError
    from storage.migrations import apply_migrations

    settings = _settings(args)
    busy = _store_in_use(settings, "it applied pending migrations when it started")
    if busy is not None:
        print(f"hotspan migrate: {busy}", file=sys.stderr)
        return 2
    try:
        ch = ClickHouse(settings.clickhouse_dsn, settings.clickhouse_database, settings.layout)
        applied = apply_migrations(ch, settings.ttl_days, reapply=args.reapply)
        ch.close()
    except (StorageError, DatabaseError) as exc:
        # A failed statement leaves the migrations before it recorded: running the command again resumes.
        print(f"hotspan migrate: {exc}", file=sys.stderr)
        return 2
    print(f"applied migrations: {', '.join(map(str, applied)) or 'none pending'}", flush=True)
    return 0


def _import(args: argparse.Namespace) -> int:
    from analysis.rule_files import RuleFileError
    from hotspan.importer import SinkError
    from storage.clickhouse import StorageError

    try:
        return _import_files(args)
    except (SinkError, StorageError, RuleFileError) as exc:
        print(f"hotspan import: {exc}", file=sys.stderr)
        return 2


def _import_files(args: argparse.Namespace) -> int:
    from collector.redaction import Redactor, load_redaction
    from hotspan.importer import OtlpHttpSink, StoreSink, analyse_stored, import_paths
    from storage.clickhouse import StorageError

    if args.endpoint:
        if args.tenant:
            print("hotspan import: --tenant is for the local store; with --endpoint the token decides", file=sys.stderr)
            return 2
        token = _settings(args).token
        sink = OtlpHttpSink(args.endpoint, token=token.get_secret_value() if token else None)
        gc.freeze()  # as below
        summary = import_paths(args.paths, sink, progress=not args.no_progress)
    else:
        from hotspan.app import open_storage

        settings = _settings(args)
        busy = _store_in_use(settings, "import through it with --endpoint http://HOST:PORT, or stop it")
        if busy is not None:
            raise StorageError(busy)
        storage = open_storage(settings)
        sink = StoreSink(storage.writer, args.tenant or DEFAULT_TENANT, settings.batch_max_spans)
        # With --endpoint the server redacts by its own HOTSPAN_REDACTION; into the local store, this process does.
        table = load_redaction(settings.redaction)
        redactor = Redactor(table) if table is not None else None
        # What is loaded now lives as long as the import (see _serve): out of the collector's full passes, which
        # otherwise walk it once per few thousand JSON objects read (benchmarks/otlp_json.py: json.loads of a
        # span 119 -> 37 µs).
        gc.freeze()
        summary = import_paths(args.paths, sink, progress=not args.no_progress, redactor=redactor)
        analysed = analyse_stored(storage, settings)
        storage.clickhouse.close()
        dropped = f" ({analysed.dropped} dropped by tail sampling)" if settings.tail_sampling_path else ""
        print(f"analysed: {analysed.analysed} traces{dropped}", flush=True)
    print(summary.render())
    return 0 if summary.spans or not summary.problems else 1


def _demo(args: argparse.Namespace) -> int:
    from hotspan.demo import drive_demo, start_prometheus
    from instrumented_stack.runner import run_stack

    # A Prometheus of the demo's own scrapes the stack's engine (Capacity, vLLM engine), unless one is configured.
    configured = _settings(args).prometheus_url
    prometheus = None if args.exit or configured else start_prometheus()
    try:
        server = _start("demo", _settings(args, prometheus_url=prometheus.url if prometheus else configured))
        if server is None:
            return 2
        print(f"Hotspan is up: UI {server.base_url}/ui/  (API docs {server.base_url}/docs)", flush=True)
        if prometheus is not None:
            print(f"Prometheus scraping the stack's engine: {prometheus.url}", flush=True)
        elif not args.exit:
            print(
                "No prometheus binary (make system-deps installs it): Capacity and vLLM engine stay empty", flush=True
            )
        print(f"Running the instrumented agent stack ({args.requests} requests) ...", flush=True)
        if args.exit:
            print(f"Stack run: {run_stack(endpoint=server.base_url, requests=args.requests)}", flush=True)
        else:
            stop = threading.Event()
            traffic = threading.Thread(
                target=drive_demo,
                args=(server.base_url, args.requests, prometheus, stop, _say),
                name="demo-traffic",
            )
            traffic.start()
            _wait_for_interrupt()
            stop.set()
            traffic.join()
        server.stop()
    finally:
        if prometheus is not None:
            prometheus.close()
    return 0


def _say(line: str) -> None:
    print(line, flush=True)


def _stack(args: argparse.Namespace) -> int:
    from instrumented_stack.cli import run_stack_command

    return run_stack_command(args)


def _wait_for_interrupt() -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()


if __name__ == "__main__":
    raise SystemExit(main())
