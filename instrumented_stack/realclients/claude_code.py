"""Claude Code (the ``claude`` CLI) on the emulator's Messages API, its own OpenTelemetry traces captured.

Claude Code is one native binary (npm ``@anthropic-ai/claude-code``, which installs the binary of the
platform's ``@anthropic-ai/claude-code-<os>-<arch>``), so its HTTP stack cannot be wrapped: the ground truth
is taken by :class:`~instrumented_stack.realclients.recording_proxy.RecordingProxy`, which it is pointed at
(``ANTHROPIC_BASE_URL``) and which forwards to the emulator's ``/v1/messages``. Each user request is one
``claude -p`` turn in a scratch folder holding ``orders.txt``, offered the tools ``--bare`` mode has, ``Bash``,
``Edit`` and ``Read`` (the emulated model calls each offered tool once with placeholder arguments, then
answers: 4 LLM calls and 3 tool calls a turn; print mode refuses ``Bash`` and ``Edit`` without asking, as
permission rules do, and ``Read`` finds no file ``example``)
and its traces on (``CLAUDE_CODE_ENABLE_TELEMETRY=1``, ``CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1``, OTLP/HTTP
protobuf to the endpoint). ``--bare`` skips hooks, plugins and background requests; every model alias is the
served model.

Truth per turn (:mod:`truth`'s JSON, one entry per turn): ``e2e_ns`` is the turn's duration as the CLI reports
it (``duration_ms`` of ``--output-format json``: from the prompt to the result, without the process's start-up,
which no span covers), ``process_ns`` the whole process's, ``llm_attempts`` the proxy's timings of the model
requests made while the process ran (offsets from the process's start, not the turn's: only their lengths and
their union, ``llm_in_flight_ns``, compare with the spans), ``tools`` none (the CLI runs them itself), and
``session_id`` the ``--session-id`` given, which names the turn's trace (``session.id`` on every span); the
trace id is looked up by it once the spans have arrived, the only thing read from them.

Run: ``python -m instrumented_stack.realclients.claude_code --out tests/realworld/captures/claude_code
[--claude PATH] [--requests 3]``, with the CLI installed by
``npm install --prefix /work/sidenode/claude-code @anthropic-ai/claude-code@2.1.197`` (~250 MB) and found at
``--claude``, ``$HOTSPAN_CLAUDE_CODE`` or on the PATH as ``claude``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from instrumented_stack.realclients.emulator import MODEL, emulator_config, serve_emulator
from instrumented_stack.realclients.otlp_sink import OtlpSink, create_sink_app
from instrumented_stack.realclients.recording_proxy import RecordingProxy
from instrumented_stack.realclients.truth import TruthRecorder
from instrumented_stack.serving import ThreadedServer, bind_loopback
from instrumented_stack.telemetry import otlp_traces_url

ENV_CLAUDE = "HOTSPAN_CLAUDE_CODE"
TOOLS = "Bash,Edit,Read"
QUESTIONS = (
    "Which orders in orders.txt are late, and why?",
    "Summarise the shipping status of order 42 from orders.txt.",
    "Is any order in orders.txt waiting on a refund?",
)
ORDERS = "order 41 shipped 2026-11-28\norder 42 delayed: carrier strike\norder 43 refund pending\n"
SESSION_KEY = "session.id"
TIMEOUT_S = 120.0
EXPORT_WAIT_S = 20.0


def find_claude(given: str | None = None) -> str | None:
    """The ``claude`` executable: ``given``, else ``$HOTSPAN_CLAUDE_CODE``, else ``claude`` on the PATH."""
    return given or os.environ.get(ENV_CLAUDE) or shutil.which("claude")


@dataclass(frozen=True)
class CaptureResult:
    """A run's capture (OTLP/JSON of the turns' traces and the engine's) and its truth (JSON-ready)."""

    capture: dict
    truth: dict


def capture_turns(claude: str, otlp_endpoint: str, sink: OtlpSink, requests: int) -> CaptureResult:
    """Run ``requests`` turns of ``claude`` against a fresh emulator behind the recording proxy.

    Args:
        claude: the CLI's path.
        otlp_endpoint: root URL of the OTLP/HTTP receiver that ``sink`` fills (Claude Code's and the
            emulator's spans go there).
        sink: the receiver's store, read once the turns' spans have arrived.
        requests: number of turns (at most ``len(QUESTIONS)`` distinct questions, then repeated).

    Raises:
        RuntimeError: the CLI failed, or a turn's spans did not arrive within ``EXPORT_WAIT_S`` seconds.
    """
    recorder = TruthRecorder()
    engine_spans = BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_traces_url(otlp_endpoint)))
    version = subprocess.run([claude, "--version"], capture_output=True, text=True, check=True).stdout.split()[0]
    sessions: list[str] = []
    process_ns: list[int] = []
    with serve_emulator(emulator_config(engine_spans=True), engine_spans) as llm_url:
        proxy = RecordingProxy(llm_url, recorder)
        server = ThreadedServer(proxy.app(), bind_loopback(), name="claude-code-proxy")
        server.start()
        try:
            with tempfile.TemporaryDirectory() as scratch:
                work, home = Path(scratch) / "work", Path(scratch) / "home"
                work.mkdir()
                home.mkdir()
                (work / "orders.txt").write_text(ORDERS, encoding="utf-8")
                for index in range(requests):
                    session = str(uuid.uuid4())
                    with recorder.request(session) as truth:
                        result = _turn(claude, server.url, otlp_endpoint, work, home, session, QUESTIONS[index % 3])
                    process_ns.append(truth.e2e_ns)
                    truth.e2e_ns = int(result["duration_ms"]) * 1_000_000
                    sessions.append(session)
        finally:
            server.stop()
    trace_of = _wait_for_sessions(sink, set(sessions))
    for truth in recorder.requests:
        truth.trace_id = trace_of[truth.trace_id]
    meta = {
        "driver": "claude_code",
        "service_name": "claude-code",
        "libraries": {"npm:@anthropic-ai/claude-code": version},
        "model": MODEL,
        "stream": True,
        "engine_spans": True,
        "tools": TOOLS.split(","),
        "traceparent_sent": proxy.traceparents,
        "proxied_requests": proxy.requests,
    }
    truth = json.loads(recorder.to_json(meta))
    for entry, session, process in zip(truth["requests"], sessions, process_ns, strict=True):
        entry["session_id"], entry["process_ns"] = session, process
    return CaptureResult(sink.otlp_json(), truth)


def _turn(claude: str, base_url: str, otlp: str, work: Path, home: Path, session: str, question: str) -> dict:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-emulator",
        "ANTHROPIC_MODEL": MODEL,
        "ANTHROPIC_SMALL_FAST_MODEL": MODEL,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": MODEL,
        "ANTHROPIC_DEFAULT_SONNET_MODEL": MODEL,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": MODEL,
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "512",
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp,
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    command = [claude, "-p", "--bare", "--model", MODEL, "--tools", TOOLS, "--output-format", "json"]
    command += ["--session-id", session, question]
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"claude exited {done.returncode}: {(done.stdout + done.stderr)[-4000:]}")
    result = json.loads(done.stdout)
    if result.get("is_error"):
        raise RuntimeError(f"claude answered an error: {done.stdout[-4000:]}")
    return result


def _wait_for_sessions(sink: OtlpSink, sessions: set[str]) -> dict[str, str]:
    """session id -> trace id of its ``*.interaction`` span, once every session's has arrived."""
    deadline = time.monotonic() + EXPORT_WAIT_S
    while True:
        found: dict[str, str] = {}
        for resource in sink.otlp_json()["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    attributes = {item["key"]: item["value"] for item in span.get("attributes", [])}
                    session = attributes.get(SESSION_KEY, {}).get("stringValue")
                    if session in sessions and span["name"].endswith(".interaction"):
                        found[session] = span["traceId"]
        if len(found) == len(sessions):
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"no interaction span for sessions {sorted(sessions - found.keys())}")
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    """Write ``capture.json`` and ``capture.truth.json`` into ``--out``; exit status 1 without the CLI."""
    parser = argparse.ArgumentParser(prog="python -m instrumented_stack.realclients.claude_code")
    parser.add_argument("--out", type=Path, required=True, help="folder for capture.json and capture.truth.json")
    parser.add_argument("--claude", help=f"the claude CLI (default: ${ENV_CLAUDE}, else claude on the PATH)")
    parser.add_argument("--requests", type=int, default=3, help="turns to run (default 3)")
    args = parser.parse_args(argv)
    claude = find_claude(args.claude)
    if claude is None:
        print(f"no claude CLI: pass --claude or set {ENV_CLAUDE} (see this module's docstring)", file=sys.stderr)
        return 1
    sink = OtlpSink()
    receiver = ThreadedServer(create_sink_app(sink), bind_loopback(), name="otlp-sink")
    receiver.start()
    try:
        result = capture_turns(claude, receiver.url, sink, args.requests)
    finally:
        receiver.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "capture.json").write_text(json.dumps(result.capture, indent=1) + "\n", encoding="utf-8")
    (args.out / "capture.truth.json").write_text(json.dumps(result.truth, indent=2) + "\n", encoding="utf-8")
    shares = [round(request["llm_share"], 3) for request in result.truth["requests"]]
    print(f"claude_code {len(shares)} turns llm_share={shares}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
