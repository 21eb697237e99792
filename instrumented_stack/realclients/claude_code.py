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

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from instrumented_stack.realclients.cli_capture import (
    QUESTIONS,
    CaptureResult,
    Span,
    cli_workspace,
    find_cli,
    parse_cli_arguments,
    proxied_emulator,
    run_with_sink,
    string_attribute,
    wait_for_traces,
    write_capture,
)
from instrumented_stack.realclients.emulator import MODEL, emulator_config
from instrumented_stack.realclients.otlp_sink import OtlpSink
from instrumented_stack.realclients.recording_proxy import MESSAGES_PATHS
from instrumented_stack.realclients.truth import TruthRecorder

ENV_CLAUDE = "HOTSPAN_CLAUDE_CODE"
TOOLS = "Bash,Edit,Read"
SESSION_KEY = "session.id"
TIMEOUT_S = 120.0


def find_claude(given: str | None = None) -> str | None:
    """The ``claude`` executable: ``given``, else ``$HOTSPAN_CLAUDE_CODE``, else ``claude`` on the PATH."""
    return find_cli(given, ENV_CLAUDE, "claude")


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
    version = subprocess.run([claude, "--version"], capture_output=True, text=True, check=True).stdout.split()[0]
    sessions: list[str] = []
    process_ns: list[int] = []
    with (
        proxied_emulator(emulator_config(engine_spans=True), otlp_endpoint, recorder, MESSAGES_PATHS) as (proxy, url),
        cli_workspace() as (work, home),
    ):
        for index in range(requests):
            session = str(uuid.uuid4())
            with recorder.request(session) as truth:
                result = _turn(claude, url, otlp_endpoint, work, home, session, QUESTIONS[index % len(QUESTIONS)])
            process_ns.append(truth.e2e_ns)
            truth.e2e_ns = int(result["duration_ms"]) * 1_000_000
            sessions.append(session)
    trace_of = wait_for_traces(sink, set(sessions), _interaction_session)
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


def _interaction_session(span: Span) -> str | None:
    """The session of a turn's ``*.interaction`` span (``None`` for any other span)."""
    return string_attribute(span, SESSION_KEY) if span["name"].endswith(".interaction") else None


def main(argv: list[str] | None = None) -> int:
    """Write ``capture.json`` and ``capture.truth.json`` into ``--out``; exit status 1 without the CLI."""
    parsed = parse_cli_arguments(argv, __spec__.name, "claude", 3, find_claude)
    if parsed is None:
        return 1
    args, claude = parsed
    result = run_with_sink(lambda endpoint, sink: capture_turns(claude, endpoint, sink, args.requests))
    write_capture(result, args.out / "capture")
    shares = [round(request["llm_share"], 3) for request in result.truth["requests"]]
    print(f"claude_code {len(shares)} turns llm_share={shares}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
