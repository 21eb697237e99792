"""What the capture tools of native agent CLIs share (``claude_code``, ``codex_cli``): the emulator behind a
recording proxy, the OTLP sink waited on, and the capture files written.

A CLI that is one native binary cannot have its HTTP stack wrapped, so it is pointed at a
:class:`~instrumented_stack.realclients.recording_proxy.RecordingProxy` in front of the emulator: the wire's
timings of its model requests are the ground truth. Its own spans and the emulator's go to an
:class:`~instrumented_stack.realclients.otlp_sink.OtlpSink`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from instrumented_stack.engine import EngineConfig
from instrumented_stack.realclients.emulator import serve_emulator
from instrumented_stack.realclients.otlp_sink import OtlpSink, create_sink_app
from instrumented_stack.realclients.recording_proxy import RecordingProxy
from instrumented_stack.realclients.truth import TruthRecorder
from instrumented_stack.serving import ThreadedServer, bind_loopback
from instrumented_stack.telemetry import otlp_traces_url

EXPORT_WAIT_S = 20.0
ORDERS = "order 41 shipped 2026-11-28\norder 42 delayed: carrier strike\norder 43 refund pending\n"
"""``orders.txt`` in a CLI's working folder: what the turns' questions ask about."""
QUESTIONS = (
    "Which orders in orders.txt are late, and why?",
    "Summarise the shipping status of order 42 from orders.txt.",
    "Is any order in orders.txt waiting on a refund?",
)
"""The turns' questions, in order (repeated after the last)."""
Span = dict[str, Any]
"""One OTLP/JSON span as :meth:`OtlpSink.otlp_json` writes it, with ``attributes`` as a key -> value dict."""


@dataclass(frozen=True)
class CaptureResult:
    """A run's capture (OTLP/JSON of the turns' traces and the engine's) and its truth (JSON-ready)."""

    capture: dict
    truth: dict


@contextmanager
def proxied_emulator(
    config: EngineConfig, otlp_endpoint: str, recorder: TruthRecorder, recorded: frozenset[str]
) -> Iterator[tuple[RecordingProxy, str]]:
    """Serve the emulator (its spans to ``otlp_endpoint``, an OTLP/HTTP root URL, when ``config`` traces
    requests) behind a recording proxy that times the ``recorded`` paths into ``recorder``; yields the proxy
    and its root URL. Stopping flushes the emulator's spans."""
    engine_spans = BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_traces_url(otlp_endpoint)))
    with serve_emulator(config, engine_spans) as llm_url:
        proxy = RecordingProxy(llm_url, recorder, recorded)
        server = ThreadedServer(proxy.app(), bind_loopback(), name="cli-capture-proxy")
        server.start()
        try:
            yield proxy, server.url
        finally:
            server.stop()


def find_cli(given: str | None, env: str, name: str) -> str | None:
    """A CLI's executable: ``given``, else the environment variable ``env``, else ``name`` on the PATH."""
    return given or os.environ.get(env) or shutil.which(name)


@contextmanager
def cli_workspace() -> Iterator[tuple[Path, Path]]:
    """A scratch working folder holding ``orders.txt`` (:data:`ORDERS`) and an empty home folder for the CLI's
    settings; both removed on exit. Yields ``(work, home)``."""
    with tempfile.TemporaryDirectory() as scratch:
        work, home = Path(scratch) / "work", Path(scratch) / "home"
        work.mkdir()
        home.mkdir()
        (work / "orders.txt").write_text(ORDERS, encoding="utf-8")
        yield work, home


def wait_for_traces(sink: OtlpSink, keys: set[str], key_of: Callable[[Span], str | None]) -> dict[str, str]:
    """key -> trace id of the first received span that ``key_of`` maps to a key in ``keys``, once every key has
    one.

    Raises:
        RuntimeError: some key had no span within :data:`EXPORT_WAIT_S` seconds.
    """
    deadline = time.monotonic() + EXPORT_WAIT_S
    while True:
        found: dict[str, str] = {}
        for resource in sink.otlp_json()["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    attributes = {item["key"]: item["value"] for item in span.get("attributes", [])}
                    key = key_of({**span, "attributes": attributes})
                    if key in keys:
                        found.setdefault(key, span["traceId"])
        if len(found) == len(keys):
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"no span arrived for {sorted(keys - found.keys())}")
        time.sleep(0.2)


def run_with_sink(capture: Callable[[str, OtlpSink], CaptureResult]) -> CaptureResult:
    """``capture(otlp_endpoint, sink)`` with an OTLP/HTTP sink served on a free loopback port meanwhile."""
    sink = OtlpSink()
    receiver = ThreadedServer(create_sink_app(sink), bind_loopback(), name="otlp-sink")
    receiver.start()
    try:
        return capture(receiver.url, sink)
    finally:
        receiver.stop()


def write_capture(result: CaptureResult, stem: Path) -> None:
    """Write ``<stem>.json`` (the capture, compact) and ``<stem>.truth.json`` beside it, creating the folder."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_name(stem.name + ".json").write_text(json.dumps(result.capture) + "\n", encoding="utf-8")
    truth = json.dumps(result.truth, indent=2) + "\n"
    stem.with_name(stem.name + ".truth.json").write_text(truth, encoding="utf-8")


def string_attribute(span: Span, key: str) -> str | None:
    """The string value of ``span``'s attribute ``key`` (``None`` when it has none)."""
    return span["attributes"].get(key, {}).get("stringValue")


def parse_cli_arguments(
    argv: list[str] | None, module: str, cli: str, requests: int, find: Callable[[str | None], str | None]
) -> tuple[argparse.Namespace, str] | None:
    """The arguments of the capture tool ``python -m <module>`` (``--out``, ``--<cli>``, ``--requests``, default
    ``requests``) and the CLI's path as ``find`` locates it from ``--<cli>``; ``None``, with the reason on stderr,
    when it is not found."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}")
    parser.add_argument("--out", type=Path, required=True, help="folder for the captures and their truth")
    parser.add_argument(f"--{cli}", dest="cli", help=f"the {cli} CLI (default: the module's variable, else PATH)")
    parser.add_argument("--requests", type=int, default=requests, help=f"turns per capture (default {requests})")
    args = parser.parse_args(argv)
    found = find(args.cli)
    if found is None:
        print(f"no {cli} CLI: pass --{cli} (see {module}'s docstring)", file=sys.stderr)
        return None
    return args, found
