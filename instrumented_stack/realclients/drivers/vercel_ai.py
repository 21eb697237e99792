"""The Vercel AI SDK (npm ``ai`` + ``@ai-sdk/openai``) with its OpenTelemetry telemetry, in Node.

The work is ``node/vercel_ai.mjs`` (its header says what it runs): ``generateText`` with two tools and
``stopWhen: stepCountIs(6)``, or ``streamText`` with ``--stream``, each user request under the script's own
``POST /ask`` SERVER span, exported by the OpenTelemetry JS SDK (OTLP/HTTP protobuf) to the same endpoint;
``--http-spans on`` registers ``@opentelemetry/instrumentation-undici`` (a CLIENT span per ``fetch``). The
ground truth is measured in Node by a ``fetch`` wrapper handed to ``createOpenAI`` (the same JSON shape as
``truth``) and read back here, so the Python side exports nothing (``EXPORTS_ITSELF``). ``npm ci`` runs first
when ``node_modules`` is missing or older than the lock file (``node_packages``).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from instrumented_stack.realclients.common import (
    NODE_DIR,
    QUESTIONS,
    ROOT_SPAN_NAME,
    SYSTEM_PROMPT,
    TOOL_DESCRIPTIONS,
    DriverRun,
)
from instrumented_stack.realclients.node_packages import ensure_installed
from instrumented_stack.realclients.truth import RequestTruth
from instrumented_stack.telemetry import otlp_traces_url

LIBRARIES = (
    "npm:ai",
    "npm:@ai-sdk/openai",
    "npm:@opentelemetry/sdk-trace-node",
    "npm:@opentelemetry/exporter-trace-otlp-proto",
    "npm:@opentelemetry/instrumentation-undici",
)
EXPORTS_ITSELF = True
SCRIPT = NODE_DIR / "vercel_ai.mjs"
TIMEOUT_S = 120.0


def run(run: DriverRun) -> None:
    ensure_installed()
    options = run.options
    with tempfile.TemporaryDirectory() as scratch:
        truth_out = Path(scratch) / "truth.json"
        spec = {
            "llm_base_url": run.base_url,
            "otlp_traces_url": otlp_traces_url(options.otlp_endpoint),
            "model": options.model,
            "stream": options.stream,
            "requests": options.requests,
            "http_spans": options.http_spans,
            "tool_s": options.tool_s,
            "service_name": run.service_name,
            "root_span_name": ROOT_SPAN_NAME,
            "system_prompt": SYSTEM_PROMPT,
            "questions": list(QUESTIONS),
            "tools": TOOL_DESCRIPTIONS,
            "truth_out": str(truth_out),
        }
        command = ["node", str(SCRIPT)]
        done = subprocess.run(
            command, input=json.dumps(spec), capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{SCRIPT.name} exited {done.returncode}: {(done.stdout + done.stderr)[-4000:]}")
        measured = json.loads(truth_out.read_text(encoding="utf-8"))["requests"]
    run.recorder.requests.extend(RequestTruth.from_json(request) for request in measured)
