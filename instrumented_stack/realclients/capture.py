"""Write the golden captures: ``python -m instrumented_stack.realclients.capture --out tests/realworld/captures``.

For each driver and each of engine spans on/off and streaming off/on, runs the driver (``harness``) against
an OTLP sink (``otlp_sink``) and writes ``<out>/<driver>/engine-<on|off>-<stream|nostream>.json`` (OTLP JSON,
the run's traces, emulator spans included) and ``....truth.json`` beside it (``truth``; library versions
under ``libraries``); ``--python`` runs the drivers under another interpreter (a side virtualenv's,
``realclients.SIDE_VENV_DRIVERS``). Prints one line per capture: driver, settings, LLM share of e2e per request,
seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from instrumented_stack.realclients import DRIVERS, SIDE_VENV_DRIVERS
from instrumented_stack.realclients.harness import run_driver
from instrumented_stack.realclients.otlp_sink import OtlpSink, create_sink_app
from instrumented_stack.serving import ThreadedServer, bind_loopback


def capture_name(engine_spans: bool, stream: bool) -> str:
    """``engine-<on|off>-<stream|nostream>``, the stem of a capture's files."""
    return f"engine-{'on' if engine_spans else 'off'}-{'stream' if stream else 'nostream'}"


def main(argv: list[str] | None = None) -> int:
    """Write the captures; exit status 0 when every driver ran."""
    parser = argparse.ArgumentParser(prog="python -m instrumented_stack.realclients.capture")
    parser.add_argument("--out", type=Path, required=True, help="captures directory")
    parser.add_argument(
        "--drivers",
        default=",".join(name for name in DRIVERS if name not in SIDE_VENV_DRIVERS),
        help="comma-separated driver names (default: all but the side-virtualenv ones)",
    )
    parser.add_argument("--requests", type=int, default=2, help="user requests per capture")
    parser.add_argument("--python", help="interpreter running the drivers (a side virtualenv's; default this one)")
    args = parser.parse_args(argv)
    sink = OtlpSink()
    server = ThreadedServer(create_sink_app(sink), bind_loopback(), name="otlp-sink")
    server.start()
    try:
        for driver in args.drivers.split(","):
            for engine_spans in (True, False):
                for stream in (False, True):
                    stem = args.out / driver / capture_name(engine_spans, stream)
                    stem.parent.mkdir(parents=True, exist_ok=True)
                    with tempfile.TemporaryDirectory() as scratch:
                        result = run_driver(
                            driver,
                            server.url,
                            Path(scratch) / "truth.json",
                            stream=stream,
                            engine_spans=engine_spans,
                            requests=args.requests,
                            python=args.python,
                        )
                    capture = sink.otlp_json(set(result.trace_ids))
                    stem.with_suffix(".json").write_text(json.dumps(capture, indent=1) + "\n", encoding="utf-8")
                    truth = json.dumps(result.truth, indent=2) + "\n"
                    stem.with_name(stem.name + ".truth.json").write_text(truth, encoding="utf-8")
                    shares = [round(r["llm_share"], 3) for r in result.truth["requests"]]
                    print(f"{driver} {stem.name} llm_share={shares} {result.wall_s:.1f}s", flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
