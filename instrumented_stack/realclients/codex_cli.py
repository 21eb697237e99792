"""The Codex CLI (``codex exec``) on the emulator's Responses API, its own OpenTelemetry traces captured.

Codex is one native binary (npm ``@openai/codex``, which installs the Rust binary of the platform), so the
ground truth is taken by the recording proxy (:mod:`cli_capture`) in front of the emulator's
``/v1/responses``, the only wire API this version speaks to a custom provider (``wire_api = "responses"``).
Each user request is one ``codex exec --json`` turn in a scratch folder holding ``orders.txt``; the emulated
model calls each tool Codex offers once with the smallest valid arguments (a shell command ``example``, a plan,
an image path ...; Codex runs or refuses them), then answers: 8 model requests a turn. Its prompt is ~17,600
tokens, so the emulator serves a longer context than the drivers' (:data:`MAX_MODEL_LEN`). Codex's traces go
to the sink through ``[otel] trace_exporter`` (OTLP/HTTP protobuf) in ``$CODEX_HOME/config.toml``; Codex sends
a ``traceparent`` with each model request, so a traced emulator's ``llm_request`` spans join the turn's trace.
:func:`codex_config` can add MCP servers (Streamable HTTP ``url``) and :func:`exec_events` yields a turn's JSON
events, for a test that asks a served Hotspan's ``/mcp`` through Codex (``tests/realworld/test_codex_mcp_ask.py``).

Truth per turn (:mod:`truth`'s JSON): ``e2e_ns`` from the ``turn.started`` to the ``turn.completed`` event
as the driver reads them on Codex's stdout (JSON lines), ``process_ns`` the whole process's, ``llm_attempts``
the proxy's timings of the model requests (offsets from the process's start, as the events' are), ``tools``
none (the CLI runs them itself), ``thread_id`` the ``thread.started`` event's, which names the turn's trace
(``conversation.id`` on its ``run_turn`` span); the trace id is looked up by it once the spans have arrived,
the only thing read from them.

Run: ``python -m instrumented_stack.realclients.codex_cli --out tests/realworld/captures/codex [--codex PATH]
[--requests 2]``, with the CLI installed by ``npm install --prefix /work/sidenode/codex @openai/codex@0.171.0``
(~300 MB) and found at ``--codex``, ``$HOTSPAN_CODEX`` or on the PATH as ``codex``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from instrumented_stack.realclients.capture import capture_name
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
from instrumented_stack.realclients.truth import TruthRecorder
from instrumented_stack.telemetry import otlp_traces_url

ENV_CODEX = "HOTSPAN_CODEX"
RESPONSES_PATHS = frozenset({"/v1/responses"})
MAX_MODEL_LEN = 65536
CONVERSATION_KEY = "conversation.id"
TURN_SPAN = "run_turn"
TIMEOUT_S = 180.0


def find_codex(given: str | None = None) -> str | None:
    """The ``codex`` executable: ``given``, else ``$HOTSPAN_CODEX``, else ``codex`` on the PATH."""
    return find_cli(given, ENV_CODEX, "codex")


def capture_turns(codex: str, otlp_endpoint: str, sink: OtlpSink, requests: int, engine_spans: bool) -> CaptureResult:
    """Run ``requests`` turns of ``codex exec`` against a fresh emulator behind the recording proxy.

    Args:
        codex: the CLI's path.
        otlp_endpoint: root URL of the OTLP/HTTP receiver that ``sink`` fills (Codex's spans, and the
            emulator's when ``engine_spans``).
        sink: the receiver's store, read once the turns' spans have arrived.
        requests: number of turns (the questions repeat after :data:`QUESTIONS`).
        engine_spans: whether the emulator traces its requests (vLLM's ``llm_request`` spans).

    Raises:
        RuntimeError: the CLI failed, or a turn's spans did not arrive in time
            (:data:`~instrumented_stack.realclients.cli_capture.EXPORT_WAIT_S`).
    """
    recorder = TruthRecorder()
    version = subprocess.run([codex, "--version"], capture_output=True, text=True, check=True).stdout.split()[-1]
    config = emulator_config(engine_spans=engine_spans).model_copy(update={"max_model_len": MAX_MODEL_LEN})
    threads: list[str] = []
    process_ns: list[int] = []
    with (
        proxied_emulator(config, otlp_endpoint, recorder, RESPONSES_PATHS) as (proxy, url),
        cli_workspace() as (work, home),
    ):
        (home / "config.toml").write_text(codex_config(url, otlp_endpoint), encoding="utf-8")
        for index in range(requests):
            with recorder.request(f"turn-{index}") as truth:
                thread, turn_ns = _turn(codex, work, home, QUESTIONS[index % len(QUESTIONS)], recorder)
            process_ns.append(truth.e2e_ns)
            truth.e2e_ns = turn_ns
            threads.append(thread)
    trace_of = wait_for_traces(sink, set(threads), _turn_thread)
    for truth, thread in zip(recorder.requests, threads, strict=True):
        truth.trace_id = trace_of[thread]
    meta = {
        "driver": "codex_cli",
        "service_name": "codex_exec",
        "libraries": {"npm:@openai/codex": version},
        "model": MODEL,
        "stream": True,
        "engine_spans": engine_spans,
        "traceparent_sent": proxy.traceparents,
        "proxied_requests": proxy.requests,
    }
    truth_json = json.loads(recorder.to_json(meta))
    for entry, thread, process in zip(truth_json["requests"], threads, process_ns, strict=True):
        entry["thread_id"], entry["process_ns"] = thread, process
    kept = {truth.trace_id for truth in recorder.requests}
    return CaptureResult(sink.otlp_json(kept), truth_json)


def codex_config(base_url: str, otlp_endpoint: str | None = None, mcp_servers: Mapping[str, str] | None = None) -> str:
    """``$CODEX_HOME/config.toml``: the emulator at ``base_url`` (a root URL) as the model provider, Codex's traces
    to ``otlp_endpoint`` (an OTLP/HTTP root URL) when given, and each of ``mcp_servers`` (name -> Streamable HTTP
    URL, e.g. Hotspan's ``/mcp``) as an MCP server whose tools the model is offered."""
    config = f"""model = "{MODEL}"
model_provider = "emulator"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.emulator]
name = "vLLM emulator"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "EMULATOR_API_KEY"
"""
    if otlp_endpoint is not None:
        exporter = f'{{ otlp-http = {{ endpoint = "{otlp_traces_url(otlp_endpoint)}", protocol = "binary" }} }}'
        config += f"\n[otel]\ntrace_exporter = {exporter}\n"
    for name, url in (mcp_servers or {}).items():
        config += f'\n[mcp_servers.{name}]\nurl = "{url}"\n'
    return config


def exec_events(codex: str, work: Path, home: Path, question: str) -> Iterator[dict[str, Any]]:
    """Run one ``codex exec --json`` turn asking ``question`` in ``work`` with ``home`` as ``$CODEX_HOME``; yields
    each JSON event of its stdout as it arrives (``thread.started``, ``turn.started``, ``item.*``,
    ``turn.completed``).

    Raises:
        RuntimeError: the turn failed, or the CLI exited non-zero or without ``turn.completed`` (its stderr's tail
            in the message).
        subprocess.TimeoutExpired: the CLI did not exit within :data:`TIMEOUT_S` seconds of closing its stdout.
    """
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "CODEX_HOME": str(home), "EMULATOR_API_KEY": "sk-emu"}
    command = [codex, "exec", "--json", "--skip-git-repo-check", question]
    completed = False
    # stderr goes to a file: a pipe read only after stdout closes could fill and stall the CLI.
    with (
        tempfile.TemporaryFile("w+") as errors,
        subprocess.Popen(
            command, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, text=True
        ) as process,
    ):
        assert process.stdout is not None
        for line in process.stdout:
            event = json.loads(line) if line.startswith("{") else {}
            if event.get("type") == "turn.failed":
                process.kill()
                raise RuntimeError(f"codex turn failed: {line}")
            completed = completed or event.get("type") == "turn.completed"
            yield event
        process.wait(TIMEOUT_S)
        errors.seek(0)
        stderr = errors.read()
    if process.returncode != 0 or not completed:
        raise RuntimeError(f"codex exited {process.returncode}: {stderr[-4000:]}")


def _turn(codex: str, work: Path, home: Path, question: str, recorder: TruthRecorder) -> tuple[str, int]:
    """Run one turn; its thread id and the ns from its ``turn.started`` to its ``turn.completed`` event."""
    seen: dict[str, int] = {}
    thread = ""
    for event in exec_events(codex, work, home, question):
        seen.setdefault(str(event.get("type", "")), recorder.now_ns())
        thread = str(event.get("thread_id", thread))
    return thread, seen["turn.completed"] - seen["turn.started"]


def _turn_thread(span: Span) -> str | None:
    """The thread of a turn's ``run_turn`` span (``None`` for any other span)."""
    return string_attribute(span, CONVERSATION_KEY) if span["name"] == TURN_SPAN else None


def main(argv: list[str] | None = None) -> int:
    """Write ``engine-<on|off>-stream.json`` and their truth into ``--out``; exit status 1 without the CLI."""
    parsed = parse_cli_arguments(argv, __spec__.name, "codex", 2, find_codex)
    if parsed is None:
        return 1
    args, codex = parsed
    for engine_spans in (True, False):
        result = run_with_sink(
            lambda endpoint, sink, on=engine_spans: capture_turns(codex, endpoint, sink, args.requests, on)
        )
        write_capture(result, args.out / capture_name(engine_spans, stream=True))
        shares = [round(request["llm_share"], 3) for request in result.truth["requests"]]
        print(f"codex engine_spans={engine_spans} {len(shares)} turns llm_share={shares}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
