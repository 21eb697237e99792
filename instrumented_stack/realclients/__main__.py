"""``python -m instrumented_stack.realclients <driver> ...``: run one driver (see the package docstring).

Prints one JSON line on stdout: the truth file's metadata plus ``trace_ids``. Exit status 0 on success, 2 when
app settings (``common.AppSettings``) are given to a driver that does not run the hand-written chat loop. A
driver whose library cannot have HTTP client spans (``HTTP_SPANS = False``) runs with them off.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
from pathlib import Path

from instrumented_stack.realclients import DRIVERS
from instrumented_stack.realclients.common import AppSettings, DriverOptions, DriverRun

DEFAULT_MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _on_off(value: str) -> bool:
    if value not in ("on", "off"):
        raise argparse.ArgumentTypeError("expected 'on' or 'off'")
    return value == "on"


def parse_options(argv: list[str] | None = None) -> DriverOptions:
    """The driver options of a command line."""
    parser = argparse.ArgumentParser(prog="python -m instrumented_stack.realclients")
    parser.add_argument("driver", choices=sorted(DRIVERS))
    parser.add_argument("--llm-url", required=True, help="OpenAI-compatible server root URL (/v1 is appended)")
    parser.add_argument("--otlp-endpoint", required=True, help="OTLP/HTTP base URL (/v1/traces is appended)")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="served model name")
    parser.add_argument("--stream", action="store_true", help="streamed answers")
    parser.add_argument("--requests", type=int, default=2, help="user requests, one after another")
    parser.add_argument(
        "--engine-spans", type=_on_off, default=True, help="on|off: the server's llm_request spans (recorded only)"
    )
    parser.add_argument("--http-spans", type=_on_off, default=True, help="on|off: HTTP client spans per attempt")
    parser.add_argument("--tool-ms", type=float, default=50.0, help="milliseconds of work per tool call")
    parser.add_argument("--truth-out", type=Path, help="where to write the ground-truth JSON")
    for flag, keywords in AppSettings.options():
        parser.add_argument(flag, help="app setting (common.AppSettings; chat-loop drivers only)", **keywords)  # type: ignore[arg-type]
    args = parser.parse_args(argv)
    app = AppSettings(**{name: getattr(args, name) for name in AppSettings.__dataclass_fields__})
    return DriverOptions(
        driver=args.driver,
        llm_url=args.llm_url,
        model=args.model,
        otlp_endpoint=args.otlp_endpoint,
        stream=args.stream,
        requests=args.requests,
        engine_spans=args.engine_spans,
        http_spans=args.http_spans,
        tool_s=args.tool_ms / 1000,
        truth_out=args.truth_out,
        app=app,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the driver; print its metadata and trace ids as one JSON line."""
    options = parse_options(argv)
    module = importlib.import_module(f"instrumented_stack.realclients.drivers.{options.driver}")
    if options.app != AppSettings() and not getattr(module, "APP_SETTINGS", False):
        print(f"{options.driver} does not run the chat loop the app settings change", file=sys.stderr)
        return 2
    if not getattr(module, "HTTP_SPANS", True):
        options = dataclasses.replace(options, http_spans=False)
    run = DriverRun(options, export=not getattr(module, "EXPORTS_ITSELF", False))
    module.run(run)
    meta = run.finish(module.LIBRARIES)
    print(json.dumps({**meta, "trace_ids": [r.trace_id for r in run.recorder.requests]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
